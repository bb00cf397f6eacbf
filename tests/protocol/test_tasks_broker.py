"""Celery settings for a broker URL: Redis as before, SQLite without options create_engine refuses."""

from __future__ import annotations

import pytest
from kombu import Connection

from protocol.tasks import (MAX_INLINE_CONTENT_BYTES, BadBrokerUrl, BadDispatch, broker_transport_options,
                            inline_content, read_inline_content, result_backend_url)


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "rediss://user:pw@host:6380/1"])
def test_redis_keeps_results_in_the_broker(url: str) -> None:
    assert result_backend_url(url) == url


def test_sqlite_results_go_to_a_file_next_to_the_broker() -> None:
    assert result_backend_url("sqla+sqlite:////data/m/broker.sqlite") == "db+sqlite:////data/m/broker-results.sqlite"
    assert result_backend_url("sqla+sqlite:///broker.db") == "db+sqlite:///broker-results.db"


@pytest.mark.parametrize("url", ["sqla+sqlite://", "sqla+sqlite:///", "sqla+sqlite:///b.db?timeout=9",
                                 "amqp://guest@localhost//", "sqla+postgresql://u@h/db", "memory://"])
def test_unsupported_brokers_are_refused(url: str) -> None:
    with pytest.raises(BadBrokerUrl):
        result_backend_url(url)
    with pytest.raises(BadBrokerUrl):
        broker_transport_options(url)


def test_redis_gets_visibility_timeout_and_retries() -> None:
    options = broker_transport_options("redis://h:6379/0", visibility_timeout_s=60, max_retries=2)
    assert options == {"visibility_timeout": 60, "max_retries": 2}
    assert broker_transport_options("redis://h:6379/0") == {}


def test_sqlite_drops_the_visibility_timeout() -> None:
    options = broker_transport_options("sqla+sqlite:///b.db", visibility_timeout_s=60, max_retries=2)
    assert options == {"max_retries": 2}


def test_sqlite_options_open_a_working_transport(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}"
    # What the Redis options would do to the SQLAlchemy transport: create_engine refuses them.
    with Connection(url, transport_options={"visibility_timeout": 60}) as bad, pytest.raises(TypeError):
        bad.SimpleQueue("q")
    with Connection(url, transport_options=broker_transport_options(url, visibility_timeout_s=60,
                                                                    max_retries=2)) as connection:
        queue = connection.SimpleQueue("q")
        queue.put({"n": 1})
        assert queue.get(timeout=5).payload == {"n": 1}
        queue.close()


def test_inline_content_round_trips_and_junk_is_refused():
    name = "0x" + "ab" * 32
    assert read_inline_content(inline_content({name: b"\x00spec"})) == {name: b"\x00spec"}
    assert read_inline_content(None) == {}
    for junk, reason in ((["x"], "JSON object"), ({"0x12": "AA=="}, "content hash"), ({name: 5}, "content hash"),
                         ({name: "not base64!"}, "not base64"),
                         ({name: inline_content({name: bytes(MAX_INLINE_CONTENT_BYTES + 1)})[name]}, "more than")):
        with pytest.raises(BadDispatch, match=reason):
            read_inline_content(junk)
