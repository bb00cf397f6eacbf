"""One log follower for every party: the deployment's events after a cursor, in bounded ranges.

- The cursor is the last block whose events the caller has fully processed, with that block's
  hash. The caller's own store keeps it (`CursorStore`: the backend's database, the provider's and
  the verifier's SQLite state: client.watched_ids). It moves only after the caller handled a batch, so a restart
  resumes right after the last handled batch: nothing is delivered twice, nothing is skipped. A
  store that shares the caller's database saves the cursor inside the handler's own transaction
  (the backend's session, `SqliteCursorStore` inside the caller's `with db:`), so effects and
  cursor commit together even across a crash; the follower's own save after the handler then
  writes the same cursor again.
- Only blocks `confirmations` deep are read, so a reorg shallower than that never reaches a
  delivered block. A deeper one shows as a changed hash of the cursor block and is raised as
  `DeepReorg`; the caller decides (the backend rebuilds its tables, `WatchedIds` reads its ids
  again).
- `eth_getLogs` is asked for at most `max_range` blocks at once. A node that refuses a range
  ("block range too large", "limit exceeded", ...) is asked for half of it, down to one block,
  and the smaller range is kept. Once caught up a poll costs the same calls however long the
  chain: the head, and for new blocks the cursor's hash, the logs and the new cursor's hash.
- Logs are decoded against the deployment's ABIs into named `Event`s with plain arguments
  (addresses lower-case, byte strings 0x-hex: one spelling for comparisons and JSON columns),
  delivered in (block, log index) order.
- `client.new_heads.NewHeads` wakes a follower when the node pushes a block (WebSocket
  newHeads), so a service handles events as they arrive instead of at its next poll.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from eth_abi import decode as abi_decode
from eth_abi.exceptions import DecodingError
from eth_utils import event_abi_to_log_topic
from eth_utils.abi import collapse_if_tuple
from eth_typing import ABIEvent
from hexbytes import HexBytes
from web3 import Web3
from web3.exceptions import Web3RPCError
from web3.types import RPCEndpoint

from client import blocks
from client.errors import ClientError
from protocol.deployments import Deployment

log = logging.getLogger(__name__)

DEFAULT_MAX_RANGE = 2000
# What public nodes say when a getLogs range (or its result) is more than they serve at once:
# Alchemy, Infura, QuickNode, Ankr, geth and erigon phrasings, lower-cased.
_RANGE_REFUSALS = ("range", "limit exceeded", "too large", "too many", "exceed", "more than",
                   "response size", "query timeout")


class LogFollowerError(ClientError):
    """Logs could not be read from the node (the message says which blocks)."""


class DeepReorg(LogFollowerError):
    """A block already delivered was replaced: a reorg deeper than the confirmations."""

    def __init__(self, block: int, stored: str, current: str, confirmations: int) -> None:
        super().__init__(f"block {block} is now {current}, was {stored} when delivered "
                         f"(a reorg deeper than {confirmations} confirmations)")
        self.block = block
        self.stored = stored
        self.current = current


@dataclass(frozen=True)
class Event:
    """One decoded log of the deployment."""

    contract: str
    name: str
    args: dict[str, Any]
    block_number: int
    tx_hash: str
    log_index: int


@dataclass(frozen=True)
class Cursor:
    """The last block whose events were all handled, and its hash (0x-hex)."""

    block: int
    block_hash: str


@dataclass(frozen=True)
class Batch:
    """The events of blocks (previous cursor, cursor.block], in (block, log index) order."""

    events: list[Event]
    cursor: Cursor


class CursorStore(Protocol):
    def load(self) -> Cursor | None: ...

    def save(self, cursor: Cursor) -> None: ...

    def clear(self) -> None: ...


class MemoryCursorStore:
    """A cursor kept for the life of the process (one-shot readers, the CLI's live feed)."""

    def __init__(self, cursor: Cursor | None = None) -> None:
        self.cursor = cursor

    def load(self) -> Cursor | None:
        return self.cursor

    def save(self, cursor: Cursor) -> None:
        self.cursor = cursor

    def clear(self) -> None:
        self.cursor = None


def _plain(value: Any, address: bool) -> Any:
    """An event argument as a JSON value: byte strings as 0x-hex, addresses lower-case."""
    if isinstance(value, (bytes, bytearray, HexBytes)):
        return "0x" + bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [_plain(v, address) for v in value]
    return value.lower() if address else value


class EventLayout:
    """Where one event's arguments sit in a log (topics or data) and how to read them: decoded
    here with eth_abi from the node's JSON, with web3's result (its argument order: indexed
    first) and without its per-log formatting, a fifth of a party's time spent following logs."""

    def __init__(self, item: Mapping[str, Any]) -> None:
        self.topic = "0x" + bytes(event_abi_to_log_topic(cast(ABIEvent, dict(item)))).hex()
        self.indexed = [(i["name"], collapse_if_tuple(dict(i))) for i in item["inputs"] if i.get("indexed")]
        self.unindexed = [(i["name"], collapse_if_tuple(dict(i))) for i in item["inputs"] if not i.get("indexed")]
        self.addresses = {i["name"] for i in item["inputs"] if i["type"] in ("address", "address[]")}
        self.data_types = [kind for _, kind in self.unindexed]

    def args(self, topics: list[str], data: str) -> dict[str, Any]:
        if len(topics) != len(self.indexed) + 1:
            raise ValueError(f"{len(topics) - 1} indexed values where the event has {len(self.indexed)}")
        values = [self._topic(kind, topic) for (_, kind), topic in zip(self.indexed, topics[1:])]
        values += abi_decode(self.data_types, _bytes(data)) if self.data_types else []
        names = [name for name, _ in self.indexed + self.unindexed]
        return {name: _plain(value, name in self.addresses) for name, value in zip(names, values)}

    @staticmethod
    def _topic(kind: str, topic: str) -> Any:
        if kind in ("string", "bytes") or kind.endswith("]") or kind.startswith("("):
            return _bytes(topic)  # a dynamic value is indexed as its hash: the hash is the argument
        return abi_decode([kind], _bytes(topic))[0]


def _bytes(hex_text: str) -> bytes:
    return bytes.fromhex(hex_text.removeprefix("0x"))


class EventDecoder:
    """Maps (contract address, topic0) to the deployment's contract name and event ABI.

    `only` narrows it to some events ({"ChallengeManager": ["PogChallenged"]}); the node is then
    asked for those topics only."""

    def __init__(self, deployment: Deployment, only: Mapping[str, Iterable[str]] | None = None) -> None:
        self._by_topic: dict[tuple[str, str], tuple[str, str, EventLayout]] = {}
        wanted = {name: set(events) for name, events in only.items()} if only is not None else None
        for name, deployed in deployment.contracts.items():
            if wanted is not None and name not in wanted:
                continue
            for item in deployed.abi:
                if item.get("type") != "event" or item.get("anonymous"):
                    continue
                if wanted is not None and item["name"] not in wanted[name]:
                    continue
                layout = EventLayout(item)
                self._by_topic[(deployed.address.lower(), layout.topic)] = (name, item["name"], layout)
        if wanted is not None:
            found = {(n, e) for n, e, _ in self._by_topic.values()}
            missing = sorted(f"{n}.{e}" for n, events in wanted.items() for e in events if (n, e) not in found)
            if missing:
                raise LogFollowerError(f"the deployment has no event {', '.join(missing)}")
        self.narrowed = wanted is not None
        # Built once: a follower asks for it on every poll, and checksumming hashes each address.
        self._filter: dict[str, Any] = {"address": sorted({Web3.to_checksum_address(a) for a, _ in self._by_topic})}
        if self.narrowed:
            self._filter["topics"] = [sorted({t for _, t in self._by_topic})]

    def log_filter(self) -> dict[str, Any]:
        """The address (and, when narrowed, topic0) part of an eth_getLogs filter."""
        return {key: list(value) for key, value in self._filter.items()}

    def decode(self, raw: Mapping[str, Any]) -> Event | None:
        """A log as the node sends it (JSON: hex strings); None for a log of none of our events."""
        topics = [t.lower() for t in raw["topics"]]
        if not topics:
            return None
        found = self._by_topic.get((raw["address"].lower(), topics[0]))
        if found is None:
            return None
        name, event_name, layout = found
        try:
            args = layout.args(topics, raw["data"])
        except (ValueError, DecodingError) as exc:
            raise LogFollowerError(f"{name}.{event_name} log {raw['logIndex']} of block {raw['blockNumber']} "
                                   f"does not decode: {exc}") from exc
        return Event(contract=name, name=event_name, args=args, block_number=int(raw["blockNumber"], 16),
                     tx_hash=raw["transactionHash"].lower(), log_index=int(raw["logIndex"], 16))


def _refused_range(exc: Exception) -> bool:
    """Whether the node refused a getLogs call for its size (not for being down or the filter)."""
    if not isinstance(exc, (Web3RPCError, ValueError)):
        return False
    text = str(exc).lower()
    return any(phrase in text for phrase in _RANGE_REFUSALS)


class RangeReader:
    """eth_getLogs over any block range, asked in pieces of at most `max_range` blocks, halving
    the piece (and keeping it smaller) while the node refuses it for its size."""

    def __init__(self, web3: Web3, decoder: EventDecoder, max_range: int = DEFAULT_MAX_RANGE) -> None:
        if max_range < 1:
            raise LogFollowerError(f"max_range must be at least 1 block, not {max_range}")
        self.web3 = web3
        self.decoder = decoder
        self.max_range = max_range

    def read_piece(self, start: int, end: int) -> tuple[list[Event], int]:
        """Events of blocks start..e for the largest e <= end the node serves in one call; returns
        (events in order, e)."""
        while True:
            last = min(end, start + self.max_range - 1)
            params = {**self.decoder.log_filter(), "fromBlock": hex(start), "toBlock": hex(last)}
            try:
                raw = get_logs(self.web3, params)
            except Exception as exc:  # web3 raises Web3RPCError or ValueError by transport
                if not _refused_range(exc):
                    raise LogFollowerError(f"eth_getLogs for blocks {start}..{last} failed: {exc}") from exc
                if last == start:
                    raise LogFollowerError(f"the node refuses eth_getLogs even for block {start} alone: {exc}") from exc
                self.max_range = max(1, (last - start + 1) // 2)
                log.info("node refused eth_getLogs over %s blocks (%s); asking for %s at a time",
                         last - start + 1, exc, self.max_range)
                continue
            events = [e for e in map(self.decoder.decode, raw) if e is not None]
            events.sort(key=lambda e: (e.block_number, e.log_index))
            return events, last

    def read_block(self, block_hash: str) -> list[Event]:
        """Every event of the block with this hash, in order (EIP-234 eth_getLogs by blockHash:
        the node answers for that block or refuses it, never for another block at its height)."""
        try:
            raw = get_logs(self.web3, {**self.decoder.log_filter(), "blockHash": block_hash})
        except Exception as exc:  # web3 raises Web3RPCError or ValueError by transport
            raise LogFollowerError(f"eth_getLogs for block {block_hash} failed: {exc}") from exc
        events = [e for e in map(self.decoder.decode, raw) if e is not None]
        events.sort(key=lambda e: (e.block_number, e.log_index))
        return events

    def read(self, start: int, end: int) -> list[Event]:
        """Every event of blocks start..end (inclusive), in order."""
        out: list[Event] = []
        while start <= end:
            events, last = self.read_piece(start, end)
            out += events
            start = last + 1
        return out


def get_logs(web3: Web3, params: dict[str, Any]) -> list[dict[str, Any]]:
    """eth_getLogs answered as the node's JSON (the decoder reads it as is)."""
    answer = web3.provider.make_request(RPCEndpoint("eth_getLogs"), [params])
    if answer.get("error") is not None:
        raise Web3RPCError(f"eth_getLogs: {answer['error']}", rpc_response=answer)
    return list(answer.get("result") or [])


def events_between(web3: Web3, deployment: Deployment, only: Mapping[str, Iterable[str]], start: int,
                   end: int | None = None, max_range: int = DEFAULT_MAX_RANGE) -> list[Event]:
    """A one-off read of some events in a block range (end: the head), in bounded pieces."""
    last = web3.eth.block_number if end is None else end
    return RangeReader(web3, EventDecoder(deployment, only), max_range).read(start, last)


class LogFollower:
    """Delivers every confirmed event after the stored cursor to a handler, batch by batch."""

    def __init__(self, web3: Web3, decoder: EventDecoder, store: CursorStore, *, start_block: int,
                 confirmations: int = 0, max_range: int = DEFAULT_MAX_RANGE) -> None:
        if confirmations < 0:
            raise LogFollowerError(f"confirmations must be 0 or more, not {confirmations}")
        self.web3 = web3
        self.store = store
        self.start_block = start_block
        self.confirmations = confirmations
        self.reader = RangeReader(web3, decoder, max_range)
        self.head: int | None = None  # the head seen by the last poll

    @classmethod
    def for_deployment(cls, web3: Web3, deployment: Deployment, store: CursorStore,
                       only: Mapping[str, Iterable[str]] | None = None, **options: Any) -> LogFollower:
        """A follower of the deployment's events (or `only` some), from the earliest contract's block."""
        names = list(only) if only is not None else list(deployment.contracts)
        start = min(deployment.contract(n).block for n in names)
        return cls(web3, EventDecoder(deployment, only), store, start_block=start, **options)

    def position(self) -> int:
        """The last block handled (the block before start_block when none was)."""
        cursor = self.store.load()
        return cursor.block if cursor is not None else self.start_block - 1

    def target(self) -> int:
        """The newest block with enough confirmations (reads the head)."""
        self.head = int(self.web3.eth.block_number)
        return self.head - self.confirmations

    def poll(self, handle: Callable[[Batch], None]) -> int:
        """Hands every confirmed block's events after the cursor to `handle`, one batch per range
        read (also a batch without events, so the caller may save the cursor with its work); the
        cursor is saved after each handled batch. Returns the number of events delivered."""
        target = self.target()
        cursor = self.store.load()
        position = cursor.block if cursor is not None else self.start_block - 1
        if cursor is not None and self.head is not None and cursor.block > self.head:
            # The chain is shorter than what was delivered: replaced (a reorg, or a new chain
            # on the same node address with the same contract addresses).
            raise DeepReorg(cursor.block, cursor.block_hash, "missing", self.confirmations)
        if position >= target:
            return 0
        if cursor is not None:
            self._check_cursor(cursor)
        delivered = 0
        while position < target:
            events, last = self.reader.read_piece(position + 1, target)
            batch = Batch(events, Cursor(last, self._block_hash(last)))
            handle(batch)
            self.store.save(batch.cursor)
            delivered += len(events)
            position = last
        return delivered

    def _block_hash(self, number: int) -> str:
        return "0x" + blocks.block_hash(self.web3, number).hex()

    def _check_cursor(self, cursor: Cursor) -> None:
        if not cursor.block_hash:  # saved by an older store without its hash: nothing to compare
            return
        current = self._block_hash(cursor.block)
        if current != cursor.block_hash:
            raise DeepReorg(cursor.block, cursor.block_hash, current, self.confirmations)


__all__ = ["Batch", "Cursor", "CursorStore", "DeepReorg", "Event", "EventDecoder", "EventLayout", "LogFollower",
           "LogFollowerError", "MemoryCursorStore", "RangeReader", "events_between", "get_logs"]
