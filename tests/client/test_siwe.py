"""The one SIWE client against the real backend app (FastAPI in process, anvil underneath):
one sign-in serves many requests, the session is renewed before it expires, a forgotten
session signs in once more, and a server asking for another domain gets no signature."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.settings import Settings
from client.errors import SignInFailed
from client.siwe import SiweSession
from client.ports import free_port
from unchained_cli.chain import LocalChain
from unchained_cli.deploy import Deployer, deploy_all, write_deployment

BASE = "http://testserver"  # TestClient's base URL, which the backend is told is its public URL


class Clock:
    """A monotonic clock the test moves, so renewal is tested without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with LocalChain(port=free_port()) as local:
        path = write_deployment(deploy_all(Deployer.connect(local.rpc_url)), tmp_path_factory.mktemp("deployments"))
        yield Settings(data_dir=tmp_path_factory.mktemp("backend"), rpc_url=local.rpc_url, deployment_file=path,
                       confirmations=0, dispatch=False, run_indexer=False, public_url=BASE)


@pytest.fixture
def app(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture
def account() -> LocalAccount:
    return Account.create()


def _logins(app: TestClient) -> list[str]:
    """Sign-ins (POST /auth/login) sent through `app` from now on."""
    seen: list[str] = []
    app.event_hooks["request"] = [lambda r: seen.append(r.url.path) if r.url.path == "/auth/login" else None]
    return seen


def test_one_sign_in_serves_many_requests(app: TestClient, account: LocalAccount) -> None:
    logins = _logins(app)
    session = SiweSession(account, BASE, lifetime_s=3600)
    for _ in range(3):
        me = app.get("/auth/me", auth=session)
        assert me.status_code == 200 and me.json()["address"].lower() == account.address.lower()
    assert len(logins) == 1


def test_the_session_is_renewed_before_it_expires(app: TestClient, account: LocalAccount) -> None:
    clock = Clock()
    session = SiweSession(account, BASE, lifetime_s=600, clock=clock)
    first = session.token(app)
    clock.now += 600 - 121  # two minutes before the end: still the same session
    assert session.token(app) == first
    clock.now += 61  # inside the last minute: a new session, while the old one is still valid
    assert app.get("/auth/me", headers={"Authorization": f"Bearer {first}"}).status_code == 200
    logins = _logins(app)
    assert app.get("/auth/me", auth=session).status_code == 200
    second = session.token(app)
    assert second != first and len(logins) == 1


def test_a_forgotten_session_signs_in_once_more_and_repeats_the_request(app: TestClient,
                                                                         account: LocalAccount) -> None:
    session = SiweSession(account, BASE)
    token = session.token(app)
    assert app.post("/auth/logout", headers={"Authorization": f"Bearer {token}"}).status_code == 204
    assert app.get("/auth/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    logins = _logins(app)
    me = app.get("/auth/me", auth=session)  # 401 with the old token, then a fresh sign-in
    assert me.status_code == 200 and len(logins) == 1 and session.token(app) != token


def test_no_signature_for_a_server_that_names_another_domain(settings: Settings, account: LocalAccount,
                                                             tmp_path: Path) -> None:
    elsewhere = settings.model_copy(update={"siwe_domain": "bank.example", "data_dir": tmp_path})
    with TestClient(create_app(elsewhere)) as app:
        logins = _logins(app)
        with pytest.raises(SignInFailed, match="bank.example") as raised:
            app.get("/auth/me", auth=SiweSession(account, BASE))
    assert logins == [] and raised.value.status is None and not raised.value.transient
