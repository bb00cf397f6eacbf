"""Engine, sessions and migrations (`alembic upgrade head`, run in-process on start)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def make_engine(url: str) -> Engine:
    """An engine; SQLite gets a file directory, foreign-thread use and WAL so that the indexer
    thread and the API threads can share one file."""
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


MIGRATION_LOCK = "unchained-backend-migrations"


def migrate(engine: Engine) -> None:
    """Brings the schema to the newest revision (idempotent). On PostgreSQL, replicas starting
    together migrate one at a time: each waits for a transaction-level advisory lock (per schema),
    and the next one finds the schema at head. SQLite serializes the writes itself."""
    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ':' || :name, 0))"),
                               {"name": MIGRATION_LOCK})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    log.info("database %s at migration head", engine.url.render_as_string(hide_password=True))


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    with factory() as session:
        with session.begin():
            yield session
