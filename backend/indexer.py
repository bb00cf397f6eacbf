"""Follows every event of the deployment into the database.

- Reads through the shared log follower (client.log_follower): block ranges up to
  `head - confirmations`, so only confirmed blocks are applied, at most `batch_blocks` at once.
- Each range is one database transaction: its events, their projections and the cursor move
  together, so a crash resumes from the last committed range with nothing half-applied.
- Idempotent: an event whose (tx hash, log index) is already stored is skipped, so re-reading a
  range (or two indexers racing on one database) never applies an event twice.
- `rebuild` drops the chain tables and indexes from the deployment block again: the state is a
  function of the events alone.
- Pushed blocks (`sync_pushed`): a header the node pushed (client.new_heads) is applied from its
  own hash (its logs read by blockHash) when it links to the cursor by parent hashes: no head or
  hash reads. Anything else (a gap, a fork, a node that refuses) is left to `sync`, which the
  backend also runs at least every poll interval: reorgs and missed pushes are caught there.
- Confirmations come only from new blocks: on a node that mines only when a transaction arrives
  (anvil without a block time) the last blocks are never confirmed, so a head that stands still
  while blocks wait for confirmations is logged once per stall, saying what to change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from backend import models as m
from backend.chain import Chain
from backend.db import transaction
from backend.projections import apply
from client.log_follower import Event
from client.log_follower import Batch, Cursor, DeepReorg, LogFollower, LogFollowerError
from client.new_heads import Head

log = logging.getLogger(__name__)

NewEventsHook = Callable[[Sequence[Event]], None]
SEEN_QUERY_HASHES = 500  # tx hashes per IN (...) list: well inside every database's parameter limit
MAX_PUSHED_BLOCKS = 16  # more new blocks than this at once: one ranged read (sync) beats a read per block


class DatabaseCursor:
    """The follower's cursor in the backend database (indexer_cursor, one row per chain); the
    indexer saves it inside the transaction that applies the batch.

    It is kept in memory between passes once read or committed: the indexer holding the leader
    lock is the only writer (backend.leader; a replica that takes the lead makes a new indexer,
    which reads the row again), and reading the row was a fifth of an idle pass."""

    def __init__(self, factory: sessionmaker[Session], chain_id: int) -> None:
        self.factory = factory
        self.chain_id = chain_id
        self._known: Cursor | None = None  # the row as last read or committed by us; None: read it

    def load(self) -> Cursor | None:
        if self._known is None:
            with self.factory() as session:
                row = session.get(m.IndexerCursor, self.chain_id)
                self._known = Cursor(row.last_block, row.block_hash or "") if row else None
        return self._known

    def committed(self, cursor: Cursor) -> None:
        """The transaction that saved `cursor` with its batch committed: the row holds it."""
        self._known = cursor

    def save(self, cursor: Cursor, session: Session | None = None) -> None:
        if session is None:
            if cursor == self._known:  # committed with its batch already
                return
            with transaction(self.factory) as own:
                self.save(cursor, own)
            self._known = None  # the row moves only forward: read back what it holds now
            return
        row = session.get(m.IndexerCursor, self.chain_id)
        if row is None:
            session.add(m.IndexerCursor(chain_id=self.chain_id, last_block=cursor.block, block_hash=cursor.block_hash))
        elif cursor.block > row.last_block:
            row.last_block, row.block_hash = cursor.block, cursor.block_hash

    def clear(self) -> None:
        with transaction(self.factory) as session:
            session.execute(delete(m.IndexerCursor).where(m.IndexerCursor.chain_id == self.chain_id))
        self._known = None

    def forget(self) -> None:
        """The row was changed by other means (the chain tables emptied): read it again."""
        self._known = None


class Indexer:
    """One chain, one database. `sync()` applies every confirmed block after the cursor."""

    def __init__(self, chain: Chain, factory: sessionmaker[Session], confirmations: int,
                 batch_blocks: int = 2000, on_new_events: NewEventsHook | None = None,
                 stall_warning_s: float = 60.0) -> None:
        self.chain = chain
        self.factory = factory
        self.confirmations = confirmations
        self.on_new_events = on_new_events
        self.chain_id = chain.deployment.chain_id
        self.store = DatabaseCursor(factory, self.chain_id)
        self.follower = LogFollower.for_deployment(chain.web3, chain.deployment, self.store,
                                                   confirmations=confirmations, max_range=batch_blocks)
        self.start_block = self.follower.start_block
        self.stall_warning_s = stall_warning_s
        self._head: tuple[int, float] | None = None  # the last head seen and when it changed
        self._stall_warned = False
        self._applied = 0  # events applied by the running sync
        self._pushed: dict[int, Head] = {}  # headers pushed by the node and not yet applied, by number

    def cursor(self) -> int:
        """The last applied block (the block before the deployment when nothing is applied)."""
        return self.follower.position()

    def target(self) -> int:
        target = self.follower.target()
        self._watch_head(target + self.confirmations)
        return target

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
        """Applies every confirmed block after the cursor; returns the number of new events. A
        cursor block whose hash changed means confirmed blocks were replaced (a reorg deeper than
        the confirmation depth): the state is rebuilt from the chain as it is now."""
        try:
            applied = self._sync()
        except DeepReorg as exc:
            log.warning("chain %s: %s; rebuilding", self.chain_id, exc)
            self.reset()
            applied = self._sync()
        if self.follower.head is not None:
            self._watch_head(self.follower.head)
        return applied

    def remember(self, heads: Sequence[Head]) -> None:
        """Headers the node pushed, kept until applied (with confirmations, a block is applied
        some pushes after its own)."""
        for head in heads:
            self._pushed[head.number] = head

    def sync_pushed(self) -> int | None:
        """Applies the confirmed blocks among the pushed headers (`remember`) when they link to
        the cursor, each from its own hash: no read of the head or of any block hash. Returns the
        number of new events, or None when they do not link (a gap: a push missed or dropped; a
        fork: the cursor's block replaced; no cursor yet; too many blocks): then `sync` must run,
        and it decides (reorgs included)."""
        cursor = self.store.load()
        if not self._pushed or cursor is None or not cursor.block_hash:
            return None
        newest = max(self._pushed)
        if newest <= cursor.block:  # a pushed block at or below the cursor: replaced ones, maybe
            return None
        target = newest - self.confirmations
        if target - cursor.block > MAX_PUSHED_BLOCKS:
            return None
        chain, parent = [], cursor.block_hash
        for number in range(cursor.block + 1, target + 1):
            head = self._pushed.get(number)
            if head is None or head.parent_hash != parent:
                return None
            chain.append(head)
            parent = head.hash
        self._applied = 0
        try:
            for head in chain:
                self._apply(Batch(self.follower.reader.read_block(head.hash), Cursor(head.number, head.hash)))
                del self._pushed[head.number]
        except LogFollowerError as exc:  # the node no longer has the block (replaced meanwhile)
            log.info("chain %s: pushed block not read (%s); indexing by range", self.chain_id, exc)
            return None
        self._watch_head(newest)
        return self._applied

    def _sync(self) -> int:
        self._applied = 0
        self.follower.poll(self._apply)
        cursor = self.store.load()
        if cursor is not None:  # pushed headers at or below the cursor are applied (or were replaced)
            self._pushed = {n: h for n, h in self._pushed.items() if n > cursor.block}
        return self._applied

    def reset(self) -> None:
        """Empties the chain tables (off-chain tables are kept); the next sync starts over."""
        with transaction(self.factory) as session:
            for table in m.CHAIN_TABLES:
                session.execute(delete(table))
        self.store.forget()
        self._pushed.clear()
        log.info("chain tables emptied; chain %s will be indexed from block %s", self.chain_id, self.start_block)

    def _apply(self, batch: Batch) -> None:
        """One batch and the cursor after it in one transaction; events already stored are skipped."""
        new: list[Event] = []
        try:
            with transaction(self.factory) as session:
                seen = self._seen(session, batch.events)
                for event in batch.events:
                    if (event.tx_hash, event.log_index) in seen:
                        continue
                    session.add(m.ChainEvent(block_number=event.block_number, tx_hash=event.tx_hash,
                                             log_index=event.log_index, contract=event.contract,
                                             event=event.name, args=event.args))
                    apply(session, event)
                    session.flush()
                    new.append(event)
                self.store.save(batch.cursor, session)
            self.store.committed(batch.cursor)
        except IntegrityError:
            # Another indexer committed an overlapping range first; its rows are the same events.
            log.warning("blocks up to %s were committed by a concurrent indexer; skipping them", batch.cursor.block)
            return
        for event in new:
            log.info("indexed %s.%s block %s tx %s log %s", event.contract, event.name,
                     event.block_number, event.tx_hash, event.log_index)
        self._applied += len(new)
        if new and self.on_new_events is not None:
            self.on_new_events(new)  # after the commit: consumers see what the database holds

    @staticmethod
    def _seen(session: Session, events: Sequence[Event]) -> set[tuple[str, int]]:
        """(tx hash, log index) of the batch's events already stored: one query per
        SEEN_QUERY_HASHES transactions, not one per event."""
        hashes = sorted({e.tx_hash for e in events})
        seen: set[tuple[str, int]] = set()
        for start in range(0, len(hashes), SEEN_QUERY_HASHES):
            rows = session.execute(select(m.ChainEvent.tx_hash, m.ChainEvent.log_index)
                                   .where(m.ChainEvent.tx_hash.in_(hashes[start:start + SEEN_QUERY_HASHES])))
            seen.update((tx_hash, log_index) for tx_hash, log_index in rows)
        return seen


def rebuild(indexer: Indexer) -> int:
    """Empties the chain tables and indexes every event again (off-chain tables are kept)."""
    indexer.reset()
    return indexer.sync()
