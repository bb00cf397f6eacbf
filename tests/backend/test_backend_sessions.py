"""Sessions a backend process has looked up are answered from memory for a bounded time: a logout
through this process ends its session at once, one through another process (the row gone from the
shared database) within `session_cache_s`, and an expired session is never answered."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import backend_support as support
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, update

from backend import models as m
from backend.api.app import create_app
from backend.auth import utcnow
from renter.client import BackendClient
from tests.support.waiting import wait_until


def _client(chain, tmp_path, **overrides) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path, **overrides)
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture
def app_client(chain, tmp_path) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    yield from _client(chain, tmp_path)


def _signed_in(client: TestClient) -> dict[str, str]:
    return BackendClient(client, support.anvil_key(3))._auth()


def _forget_in_database(client: TestClient, change: object) -> None:
    """What another backend process on the same database does: the session row changed there."""
    with client.app.state.backend.factory() as db:
        db.execute(change)
        db.commit()


def test_a_logout_here_ends_the_session_at_once(app_client: TestClient) -> None:
    headers = _signed_in(app_client)
    assert app_client.get("/auth/me", headers=headers).status_code == 200
    assert app_client.post("/auth/logout", headers=headers).status_code == 204
    assert app_client.get("/auth/me", headers=headers).status_code == 401


def test_a_session_removed_elsewhere_is_trusted_only_until_the_cache_age(chain, tmp_path) -> None:  # type: ignore[no-untyped-def]
    for client in _client(chain, tmp_path, session_cache_s=2.0):
        headers = _signed_in(client)
        assert client.get("/auth/me", headers=headers).status_code == 200  # now held in memory
        _forget_in_database(client, delete(m.AuthSession))
        assert client.get("/auth/me", headers=headers).status_code == 200
        wait_until(lambda: client.get("/auth/me", headers=headers).status_code == 401, 10,
                   "the session refused once its cache age passed", 0.2)


def test_an_expired_session_is_refused_even_from_memory(app_client: TestClient) -> None:
    headers = _signed_in(app_client)
    assert app_client.get("/auth/me", headers=headers).status_code == 200
    sessions = app_client.app.state.backend.sessions
    token = headers["Authorization"].removeprefix("Bearer ")
    sessions.keep(sessions.key(token), support.anvil_key(3).address.lower(), utcnow() - timedelta(seconds=1))
    _forget_in_database(app_client, update(m.AuthSession).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert app_client.get("/auth/me", headers=headers).status_code == 401


def test_no_cache_asks_the_database_every_time(chain, tmp_path) -> None:  # type: ignore[no-untyped-def]
    for client in _client(chain, tmp_path, session_cache_s=0):
        headers = _signed_in(client)
        assert client.get("/auth/me", headers=headers).status_code == 200
        _forget_in_database(client, delete(m.AuthSession))
        assert client.get("/auth/me", headers=headers).status_code == 401
