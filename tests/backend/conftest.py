"""Fixtures: the session chain with the deployed contract set, a served backend, SQLite and
PostgreSQL databases (Redis: `redis_url` of tests/conftest.py)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import backend_support
import pytest
from eth_account import Account
from backend_support import private_schema

from client.keystore import PASSWORD_FILE_ENV
from protocol.deployments import Deployment
from tests.support.chain import SharedChains
from unchained_cli.chain import LocalChain
from devtools.session import ChainSession


@pytest.fixture(scope="module")
def chain(chains: SharedChains) -> tuple[LocalChain, Deployment, Path]:
    """The session's instant chain as just deployed (tests/support/chain.py)."""
    shared = chains.get()
    return shared.local, shared.deployment, shared.deployment_file


@pytest.fixture(scope="module")
def session(chain) -> ChainSession:  # type: ignore[no-untyped-def]
    local, deployment, _ = chain
    return ChainSession.connect(local.rpc_url, deployment)


@pytest.fixture(scope="module")
def market(session: ChainSession) -> backend_support.Parties:
    return backend_support.full_market(session)


@pytest.fixture(scope="module")
def server(chain, session, market, tmp_path_factory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A live backend (uvicorn in a thread, indexer following the chain) over the market, its
    provider verified again after the dispute it lost (jobs run on it here)."""
    backend_support.reverify(session, market)
    with backend_support.live_backend(chain, tmp_path_factory.mktemp("served")) as url:
        yield url


def _pg_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def pg_url() -> Iterator[str]:
    if not _pg_available():
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    with private_schema() as url:
        yield url


@pytest.fixture
def keystore(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Renter #3's encrypted keystore, its password in a file that UNCHAINED_PASSWORD_FILE names."""
    path = tmp_path / "renter.json"
    path.write_text(json.dumps(Account.encrypt(backend_support.anvil_key(3).key, "correct horse")))
    (tmp_path / "password").write_text("correct horse\n")
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(tmp_path / "password"))
    return path


@pytest.fixture
def dispatch_key(tmp_path: Path) -> dict[str, Path]:
    """The dispatch key of the test deployment: the deployer's, anvil #0 (client.task_auth.dispatcher_of)."""
    path = tmp_path / "dispatcher.json"
    path.write_text(json.dumps(Account.encrypt(backend_support.anvil_key(0).key, "dispatch", kdf="scrypt", iterations=1 << 10)))
    (tmp_path / "dispatch-password").write_text("dispatch\n")
    return {"keystore": path, "password_file": tmp_path / "dispatch-password"}
