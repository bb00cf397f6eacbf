"""One backend process: settings, database, blob store, chain connection, indexer, dispatcher."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from backend.chain import Chain
from backend.db import make_engine, migrate, session_factory
from backend.dispatch import Dispatcher, make_celery
from backend.indexer import Indexer
from backend.metrics import Metrics
from backend.projections import Event
from backend.errors import BackendError
from backend.settings import Settings
from backend.storage import BlobStore

log = logging.getLogger(__name__)


@dataclass
class Backend:
    settings: Settings
    engine: Engine
    factory: sessionmaker[Session]
    blobs: BlobStore
    metrics: Metrics
    _chain: Chain | None = None
    indexer: Indexer | None = None
    dispatcher: Dispatcher | None = None
    _thread: threading.Thread | None = field(default=None, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, settings: Settings) -> Backend:
        """Connects the database and brings its schema to the newest migration."""
        engine = make_engine(settings.db_url)
        migrate(engine)
        return cls(settings=settings, engine=engine, factory=session_factory(engine),
                   blobs=BlobStore(settings.blob_dir), metrics=Metrics())

    def chain(self) -> Chain:
        """The chain connection, made on first use (the API serves the index without a node)."""
        with self._lock:
            if self._chain is None:
                self._chain = Chain.connect(self.settings)
            return self._chain

    def make_indexer(self) -> Indexer:
        if self.indexer is None:
            if self.settings.dispatch and self.dispatcher is None:
                self.dispatcher = Dispatcher(make_celery(self.settings.broker_url), self.factory)
            self.indexer = Indexer(
                self.chain(), self.factory, self.settings.confirmations, self.settings.index_batch_blocks,
                on_new_events=self._on_new_events,
            )
        return self.indexer

    def _on_new_events(self, events: Sequence[Event]) -> None:
        self.metrics.events_indexed.inc(len(events))
        if self.dispatcher is not None:
            self.dispatcher.on_new_events(events)

    def start_indexer(self) -> None:
        self._thread = threading.Thread(target=self._follow, name="indexer", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        """Index, then resend dispatches the broker refused, every poll until close(). The node,
        the database or the broker may be down for a while: errors are logged and retried."""
        while not self._stop.is_set():
            try:
                indexer = self.make_indexer()
                indexer.sync()
                if self.dispatcher is not None:
                    self.dispatcher.retry_pending()
            except BackendError as exc:  # node or broker away: one line a pass, not a traceback
                log.warning("indexer pass failed (%s); retrying in %.1fs", exc, self.settings.index_poll_seconds)
            except Exception:  # keep following: the next pass retries from the committed cursor
                log.exception("indexer pass failed; retrying in %.1fs", self.settings.index_poll_seconds)
            self._stop.wait(self.settings.index_poll_seconds)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.engine.dispose()
