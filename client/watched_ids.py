"""Ids a party keeps following (open challenges, disputes, providers), taken from contract events
through one log follower and kept with its cursor in the party's SQLite state file."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from web3 import Web3

from client.log_follower import Batch, Cursor, DeepReorg, Event, LogFollower
from protocol.deployments import Deployment

log = logging.getLogger(__name__)


class SqliteCursorStore:
    """Cursors in a party's SQLite database, one row per follower name (table log_cursors). The
    caller's own tables may live in the same database: `save` inside the caller's `with db:`
    commits the cursor with the caller's rows."""

    def __init__(self, db: sqlite3.Connection, name: str) -> None:
        self.db = db
        self.name = name
        with db:
            db.execute("CREATE TABLE IF NOT EXISTS log_cursors "
                       "(name TEXT PRIMARY KEY, block INTEGER NOT NULL, block_hash TEXT NOT NULL)")

    def load(self) -> Cursor | None:
        row = self.db.execute("SELECT block, block_hash FROM log_cursors WHERE name = ?", (self.name,)).fetchone()
        return Cursor(int(row[0]), str(row[1])) if row else None

    def save(self, cursor: Cursor) -> None:
        with self.db:
            self.db.execute("INSERT INTO log_cursors (name, block, block_hash) VALUES (?, ?, ?) ON CONFLICT(name) "
                            "DO UPDATE SET block = excluded.block, block_hash = excluded.block_hash",
                            (self.name, cursor.block, cursor.block_hash))

    def clear(self) -> None:
        with self.db:
            self.db.execute("DELETE FROM log_cursors WHERE name = ?", (self.name,))


def open_state(path: Path | None) -> sqlite3.Connection:
    """A party's state database (a file, or memory when `path` is None); one connection, used
    by one thread at a time (the agents' heartbeat or tick)."""
    if path is None:
        return sqlite3.connect(":memory:", check_same_thread=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=30, check_same_thread=False)
    # Every poll commits its cursor (each heartbeat or tick): WAL with synchronous=NORMAL appends
    # instead of syncing the file each time. A crash keeps every commit; a power cut may lose the
    # last ones, and the events after the older cursor are then read again (ids are kept once).
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


Pick = Callable[[Event], "tuple[str, Any] | None"]


class WatchedIds:
    """Ids a party keeps following (open challenges, disputes, providers), taken from events
    through one follower and kept with its cursor in one SQLite database: a poll adds the new
    ids in the same transaction that moves the cursor, so a restart neither loses nor repeats
    one. `pick` maps an event to (kind, id) or None. The caller drops ids that ended (`forget`).
    After a reorg deeper than the confirmations every id is dropped and read again."""

    def __init__(self, web3: Web3, deployment: Deployment, db: sqlite3.Connection, name: str,
                 only: Mapping[str, Iterable[str]], pick: Pick, **options: Any) -> None:
        # One deployment's ids: a state file reused on another deployment starts afresh.
        first = min(deployment.contracts.values(), key=lambda c: c.block)
        self.name = f"{name}@{deployment.chain_id}:{first.address.lower()}"
        self.db = db
        self.pick = pick
        self.store = SqliteCursorStore(db, self.name)
        with db:
            db.execute("CREATE TABLE IF NOT EXISTS watched_ids "
                       "(watcher TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (watcher, kind, id))")
        self.follower = LogFollower.for_deployment(web3, deployment, self.store, only, **options)

    def refresh(self) -> int:
        """Reads the new events; returns the number of new ids."""
        before = self._count()
        try:
            self.follower.poll(self._keep)
        except DeepReorg as exc:
            log.warning("%s: %s; reading its events again", self.name, exc)
            with self.db:
                self.db.execute("DELETE FROM watched_ids WHERE watcher = ?", (self.name,))
                self.store.clear()
            self.follower.poll(self._keep)
        return self._count() - before

    def ids(self, kind: str) -> list[Any]:
        rows = self.db.execute("SELECT id FROM watched_ids WHERE watcher = ? AND kind = ?", (self.name, kind))
        return sorted(json.loads(r[0]) for r in rows)

    def forget(self, kind: str, ids: Iterable[Any]) -> None:
        with self.db:
            self.db.executemany("DELETE FROM watched_ids WHERE watcher = ? AND kind = ? AND id = ?",
                                [(self.name, kind, json.dumps(i)) for i in ids])

    def _keep(self, batch: Batch) -> None:
        picked = [p for p in map(self.pick, batch.events) if p is not None]
        with self.db:  # the ids and the cursor after them commit together
            self.db.executemany("INSERT OR IGNORE INTO watched_ids (watcher, kind, id) VALUES (?, ?, ?)",
                                [(self.name, kind, json.dumps(i)) for kind, i in picked])
            self.store.save(batch.cursor)

    def _count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM watched_ids WHERE watcher = ?", (self.name,)).fetchone()[0])


__all__ = ["SqliteCursorStore", "WatchedIds", "open_state"]
