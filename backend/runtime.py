"""One backend process: settings, database, blob store, chain connection, indexer, dispatcher.

Several processes (replicas) may share one database: each serves the API, and the one holding the
leader lock (backend.leader) indexes and dispatches.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from backend.auth import SessionCache
from backend.chain import Chain
from backend.errors import ChainUnavailable
from backend.db import make_engine, migrate, session_factory
from backend.dispatch import Dispatcher, make_celery
from backend.indexer import Indexer
from backend.job_signals import JobSignals
from backend.leader import Leadership
from backend.metrics import Metrics
from backend.object_store import ObjectStore
from client.log_follower import Event
from backend.errors import BackendError
from backend.settings import Settings
from backend.storage import BlobStore
from client.new_heads import NewHeads, websocket_url
from client.keystore import load_keystore
from client.task_auth import TaskAuth, domain_of

log = logging.getLogger(__name__)

LEADER_REST_S = 3.0  # a leader the broker refused leaves the lock to other replicas this long
PASS_BURST = 3  # indexer passes that may follow each other at once before index_min_interval_s paces them


@dataclass
class PassPacer:
    """Indexer passes at most one per `interval_s` on average, but up to `burst` back to back after a
    quieter spell (a token bucket). Under load (a node mining each transaction at once) a burst of
    blocks is still read by few passes; a lone block that follows another within the interval (a
    renter's funding right after the previous job's commit) is indexed at once instead of after a
    rest: a fixed rest after every pass delayed such a block by up to interval_s (the renter bench
    measured 100 ms for one job in four)."""

    interval_s: float
    burst: int = PASS_BURST
    _credit: float = 0.0
    _at: float | None = None  # when credit was last counted (time.monotonic)

    def take(self, now: float) -> float:
        """Takes one pass's credit at `now`; returns the seconds to rest before that pass (0: at once)."""
        if self.interval_s <= 0:
            return 0.0
        elapsed = self.burst * self.interval_s if self._at is None else now - self._at
        self._credit = min(float(self.burst), self._credit + elapsed / self.interval_s) - 1
        self._at = now
        return max(0.0, -self._credit * self.interval_s)


def shared_store(settings: Settings) -> ObjectStore | None:
    """The object store replicas share blobs through, checked at start; None: none configured."""
    if not settings.blob_store_url:
        return None
    store = ObjectStore(settings.blob_store_url)
    store.check()
    return store


@dataclass
class Backend:
    settings: Settings
    engine: Engine
    factory: sessionmaker[Session]
    blobs: BlobStore
    metrics: Metrics
    sessions: SessionCache
    signals: JobSignals = field(default_factory=JobSignals)  # wakes GET /jobs/{id}/result?wait=S
    _chain: Chain | None = None
    _task_auth: TaskAuth | None = None
    indexer: Indexer | None = None
    dispatcher: Dispatcher | None = None
    heads: NewHeads | None = None  # new blocks pushed by the node, while the indexer thread runs
    leadership: Leadership | None = None  # made with the indexer thread
    _ranged_pass_due: float = 0.0  # monotonic time of the next full (ranged) index pass, pushes or not
    _thread: threading.Thread | None = field(default=None, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, settings: Settings) -> Backend:
        """Connects the database and brings its schema to the newest migration."""
        engine = make_engine(settings.db_url)
        migrate(engine)
        return cls(settings=settings, engine=engine, factory=session_factory(engine),
                   blobs=BlobStore(settings.blob_dir, shared_store(settings)), metrics=Metrics(),
                   sessions=SessionCache(settings, settings.session_cache_s))

    def chain(self) -> Chain:
        """The chain connection, made on first use (the API serves the index without a node)."""
        with self._lock:
            return self._chain_unlocked()

    def _chain_unlocked(self) -> Chain:
        if self._chain is None:
            self._chain = Chain.connect(self.settings)
        return self._chain

    def min_provider_stake(self) -> int | None:
        """The registry's minimum provider stake; None while the node cannot be read (the index
        is still served: then only the events decide who is active)."""
        try:
            return self.chain().min_provider_stake()
        except ChainUnavailable:
            return None

    def task_auth(self) -> TaskAuth:
        """The dispatch key's signer, opened once (client.keystore: password file or prompt)."""
        with self._lock:
            if self._task_auth is None:
                assert self.settings.keystore is not None
                account = load_keystore(self.settings.keystore, self.settings.password_file)
                self._task_auth = TaskAuth(domain_of(self._chain_unlocked().deployment), account)
            return self._task_auth

    def make_indexer(self) -> Indexer:
        if self.indexer is None:
            if self.settings.dispatch and self.dispatcher is None:
                if self.settings.keystore is None:
                    log.warning("dispatch is off: tasks are signed with the dispatch key; set UNCHAINED_BACKEND_KEYSTORE")
                else:
                    self.dispatcher = Dispatcher(make_celery(self.settings.broker_url, self.task_auth), self.factory,
                                                 self.blobs)
            self.indexer = Indexer(
                self.chain(), self.factory, self.settings.confirmations, self.settings.index_batch_blocks,
                on_new_events=self._on_new_events,
            )
        return self.indexer

    def _on_new_events(self, events: Sequence[Event]) -> None:
        self.metrics.events_indexed.inc(len(events))
        self.signals.notify(e.args["jobId"] for e in events if "jobId" in e.args)
        if self.dispatcher is not None:
            self.dispatcher.on_new_events(events)

    def start_indexer(self) -> None:
        self._thread = threading.Thread(target=self._follow, name="indexer", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        """Index, then resend dispatches the broker refused, on every new block the node pushes
        and at least every poll, until close(). The node, the database or the broker may be down
        for a while: errors are logged and retried."""
        ws_url = self.settings.ws_url or websocket_url(self.settings.rpc_url)
        self.heads = NewHeads(ws_url) if ws_url != "off" else None
        try:
            self._follow_until_closed(self.heads)
        finally:
            if self.heads is not None:
                self.heads.close()

    def _follow_until_closed(self, heads: NewHeads | None) -> None:
        self.leadership = Leadership(self.engine)
        pacer = PassPacer(self.settings.index_min_interval_s)
        try:
            while not self._stop.is_set():
                self._pass(heads, pacer)
        finally:
            self.leadership.release()

    def _pass(self, heads: NewHeads | None, pacer: PassPacer) -> None:
        """One pass, then a wait for the next block or poll (and the pacer's rest, if any)."""
        try:
            self._lead(heads)
        except BackendError as exc:  # node or broker away: one line a pass, not a traceback
            log.warning("indexer pass failed (%s); retrying in %.1fs", exc, self.settings.index_poll_seconds)
        except Exception:  # keep following: the next pass retries from the committed cursor
            log.exception("indexer pass failed; retrying in %.1fs", self.settings.index_poll_seconds)
        if heads is not None:
            heads.wait(self.settings.index_poll_seconds)
        else:
            self._stop.wait(self.settings.index_poll_seconds)
        rest = pacer.take(time.monotonic())
        if rest > 0:
            self._stop.wait(rest)

    def _lead(self, heads: NewHeads | None = None) -> None:
        """As the leader, index and dispatch; a replica that just became leader first sweeps what
        a previous leader left undispatched. Otherwise nothing: the API reads what the leader indexes.

        Blocks the node pushed are indexed from their headers (Indexer.sync_pushed: one log read a
        block); a full pass (head, cursor hash, ranges) runs when they do not link to the cursor
        and at least every index_poll_seconds, so reorgs and missed pushes are caught there."""
        assert self.leadership is not None
        was_leading = self.leadership.leading
        if not self.leadership.hold():
            return
        if not was_leading:
            self.indexer = None  # another replica moved the cursor meanwhile: start from the stored one
        indexer = self.make_indexer()
        pushed = heads.take() if heads is not None else []
        indexer.remember(pushed)
        # Pushed blocks first (their jobs dispatched at once), then the full pass if they did not
        # link or one is due: it never delays a pushed block's dispatch.
        applied_pushed = was_leading and bool(pushed) and indexer.sync_pushed() is not None
        now = time.monotonic()
        if not applied_pushed or now >= self._ranged_pass_due:
            indexer.sync()
            self._ranged_pass_due = now + self.settings.index_poll_seconds
        if self.dispatcher is None:
            return
        if not was_leading:
            self.dispatcher.sweep()
        self.dispatcher.retry_pending()
        if self.dispatcher.broker_refused:  # a replica that reaches the broker should dispatch instead
            self.leadership.step_down(LEADER_REST_S)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.engine.dispose()
