"""Follows every event of the deployment into the database.

- Reads logs in block ranges up to `head - confirmations`, so only confirmed blocks are applied.
- Each range is one database transaction: its events, their projections and the cursor move
  together, so a crash resumes from the last committed range with nothing half-applied.
- Idempotent: an event whose (tx hash, log index) is already stored is skipped, so re-reading a
  range (or two indexers racing on one database) never applies an event twice.
- `rebuild` drops the chain tables and indexes from the deployment block again: the state is a
  function of the events alone.
- Confirmations come only from new blocks: on a node that mines only when a transaction arrives
  (anvil without a block time) the last blocks are never confirmed, so a head that stands still
  while blocks wait for confirmations is logged once per stall, saying what to change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eth_typing import ChecksumAddress
from eth_utils import event_abi_to_log_topic
from hexbytes import HexBytes
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from web3 import Web3
from web3.contract import Contract

from backend import models as m
from backend.chain import Chain
from backend.db import transaction
from backend.projections import Event, apply

log = logging.getLogger(__name__)

NewEventsHook = Callable[[Sequence[Event]], None]


def _plain(value: Any) -> Any:
    """Event arguments as JSON values: byte strings as lower-case 0x-hex."""
    if isinstance(value, (bytes, bytearray, HexBytes)):
        return "0x" + bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass
class EventDecoder:
    """Maps (contract address, topic0) to the contract's name and event decoder."""

    chain: Chain
    _by_topic: dict[tuple[str, bytes], tuple[str, Contract, str]] = field(default_factory=dict)
    _addresses: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, deployed in self.chain.deployment.contracts.items():
            contract = self.chain.contract(name)
            for item in deployed.abi:
                if item.get("type") == "event" and not item.get("anonymous"):
                    topic = bytes(event_abi_to_log_topic(item))  # type: ignore[arg-type]
                    self._by_topic[(contract.address.lower(), topic)] = (name, contract, item["name"])
                    self._addresses[(name, item["name"])] = {
                        i["name"] for i in item["inputs"] if i["type"] in ("address", "address[]")
                    }

    @property
    def addresses(self) -> list[ChecksumAddress]:
        return sorted({Web3.to_checksum_address(a) for a, _ in self._by_topic})

    def decode(self, raw: Any) -> Event | None:
        topics = raw["topics"]
        if not topics:
            return None
        key = (raw["address"].lower(), bytes(topics[0]))
        found = self._by_topic.get(key)
        if found is None:
            return None
        name, contract, event_name = found
        decoded = contract.events[event_name]().process_log(raw)
        args = {k: _plain(v) for k, v in decoded["args"].items()}
        for arg in self._addresses[(name, event_name)]:  # one spelling of addresses everywhere
            value = args[arg]
            args[arg] = [a.lower() for a in value] if isinstance(value, list) else value.lower()
        return Event(
            contract=name,
            name=event_name,
            args=args,
            block_number=int(raw["blockNumber"]),
            tx_hash="0x" + bytes(raw["transactionHash"]).hex(),
            log_index=int(raw["logIndex"]),
        )


class Indexer:
    """One chain, one database. `sync()` applies every confirmed block after the cursor."""

    def __init__(self, chain: Chain, factory: sessionmaker[Session], confirmations: int,
                 batch_blocks: int = 2000, on_new_events: NewEventsHook | None = None,
                 stall_warning_s: float = 60.0) -> None:
        self.chain = chain
        self.factory = factory
        self.confirmations = confirmations
        self.batch_blocks = batch_blocks
        self.on_new_events = on_new_events
        self.decoder = EventDecoder(chain)
        self.chain_id = chain.deployment.chain_id
        self.start_block = min(c.block for c in chain.deployment.contracts.values())
        self.stall_warning_s = stall_warning_s
        self._head: tuple[int, float] | None = None  # the last head seen and when it changed
        self._stall_warned = False

    def cursor(self) -> int:
        """The last applied block (the block before the deployment when nothing is applied)."""
        with self.factory() as session:
            row = session.get(m.IndexerCursor, self.chain_id)
            return row.last_block if row else self.start_block - 1

    def target(self) -> int:
        head = self.chain.web3.eth.block_number
        self._watch_head(head)
        return head - self.confirmations

    def _watch_head(self, head: int) -> None:
        """Warns once when the head stood still for stall_warning_s while blocks wait for
        confirmations that only new blocks can give."""
        now = time.monotonic()
        if self._head is None or self._head[0] != head:
            self._head, self._stall_warned = (head, now), False
            return
        if self.confirmations and not self._stall_warned and now - self._head[1] >= self.stall_warning_s:
            self._stall_warned = True
            log.warning("chain %s: no new block for %.0f s; blocks %s..%s wait for %s confirmations that only new "
                        "blocks give. A node that mines only when a transaction arrives never confirms them: "
                        "give it a block time (`unchained chain up` mines a block a second) or set "
                        "UNCHAINED_BACKEND_CONFIRMATIONS=0", self.chain_id, now - self._head[1],
                        max(head - self.confirmations + 1, self.start_block), head, self.confirmations)

    def sync(self) -> int:
        """Applies every confirmed block after the cursor; returns the number of new events."""
        total = 0
        self._check_for_reorg()
        cursor, target = self.cursor(), self.target()
        while cursor < target:
            end = min(cursor + self.batch_blocks, target)
            total += self._apply_range(cursor + 1, end)
            cursor = end
        return total

    def _block_hash(self, number: int) -> str:
        return "0x" + bytes(self.chain.web3.eth.get_block(number)["hash"]).hex()

    def _check_for_reorg(self) -> None:
        """A cursor block whose hash changed means confirmed blocks were replaced (a reorg deeper
        than the confirmation depth): the state is rebuilt from the chain as it is now."""
        with self.factory() as session:
            row = session.get(m.IndexerCursor, self.chain_id)
            if row is None or row.block_hash is None:
                return
            last_block, stored = row.last_block, row.block_hash
        current = self._block_hash(last_block)
        if current != stored:
            log.warning("chain %s: block %s is now %s, was %s (reorg deeper than %s confirmations); rebuilding",
                        self.chain_id, last_block, current, stored, self.confirmations)
            self.reset()

    def reset(self) -> None:
        """Empties the chain tables (off-chain tables are kept); the next sync starts over."""
        with transaction(self.factory) as session:
            for table in m.CHAIN_TABLES:
                session.execute(delete(table))
        log.info("chain tables emptied; chain %s will be indexed from block %s", self.chain_id, self.start_block)

    def _apply_range(self, start: int, end: int) -> int:
        logs = self.chain.web3.eth.get_logs(
            {"fromBlock": start, "toBlock": end, "address": self.decoder.addresses}
        )
        end_hash = self._block_hash(end)
        events = [e for e in (self.decoder.decode(raw) for raw in logs) if e is not None]
        events.sort(key=lambda e: (e.block_number, e.log_index))
        new: list[Event] = []
        try:
            with transaction(self.factory) as session:
                for event in events:
                    if self._seen(session, event):
                        continue
                    session.add(m.ChainEvent(block_number=event.block_number, tx_hash=event.tx_hash,
                                             log_index=event.log_index, contract=event.contract,
                                             event=event.name, args=event.args))
                    apply(session, event)
                    session.flush()
                    new.append(event)
                self._move_cursor(session, end, end_hash)
        except IntegrityError:
            # Another indexer committed an overlapping range first; its rows are the same events.
            log.warning("blocks %s..%s were committed by a concurrent indexer; skipping them", start, end)
            return 0
        for event in new:
            log.info("indexed %s.%s block %s tx %s log %s", event.contract, event.name,
                     event.block_number, event.tx_hash, event.log_index)
        if new and self.on_new_events is not None:
            self.on_new_events(new)  # after the commit: consumers see what the database holds
        return len(new)

    @staticmethod
    def _seen(session: Session, event: Event) -> bool:
        return session.scalar(
            select(m.ChainEvent.id).where(m.ChainEvent.tx_hash == event.tx_hash,
                                          m.ChainEvent.log_index == event.log_index)
        ) is not None

    def _move_cursor(self, session: Session, block: int, block_hash: str) -> None:
        row = session.get(m.IndexerCursor, self.chain_id)
        if row is None:
            session.add(m.IndexerCursor(chain_id=self.chain_id, last_block=block, block_hash=block_hash))
        elif block > row.last_block:
            row.last_block, row.block_hash = block, block_hash


def rebuild(indexer: Indexer) -> int:
    """Empties the chain tables and indexes every event again (off-chain tables are kept)."""
    indexer.reset()
    return indexer.sync()
