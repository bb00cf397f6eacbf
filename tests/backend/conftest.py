"""Fixtures: anvil with the deployed contract set, SQLite and PostgreSQL databases, Redis."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import backend_support
import pytest
import uvicorn
from eth_account import Account
from backend_support import private_schema

from backend.api.app import create_app
from client.keystore import PASSWORD_FILE_ENV
from protocol.deployments import Deployment
from unchained_cli.chain import LocalChain, free_port
from unchained_cli.deploy import Deployer, deploy_all, write_deployment
from unchained_cli.session import ChainSession


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalChain, Deployment, Path]]:
    with LocalChain(port=free_port()) as local:
        deployment = deploy_all(Deployer.connect(local.rpc_url))
        path = write_deployment(deployment, tmp_path_factory.mktemp("deployments"))
        yield local, deployment, path


@pytest.fixture(scope="module")
def session(chain) -> ChainSession:  # type: ignore[no-untyped-def]
    local, deployment, _ = chain
    return ChainSession.connect(local.rpc_url, deployment)


@pytest.fixture(scope="module")
def market(session: ChainSession) -> backend_support.Parties:
    return backend_support.full_market(session)


@pytest.fixture(scope="module")
def server(chain, market, tmp_path_factory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A live backend (uvicorn in a thread, indexer following the chain) over the market."""
    port = free_port()
    settings = backend_support.make_settings(chain, tmp_path_factory.mktemp("served"), run_indexer=True,
                                             index_poll_seconds=0.1, public_url=f"http://127.0.0.1:{port}")
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


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


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A private redis-server on a free port (no persistence), so tests never see others' keys."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=5)


@pytest.fixture
def keystore(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Renter #3's encrypted keystore, its password in a file that UNCHAINED_PASSWORD_FILE names."""
    path = tmp_path / "renter.json"
    path.write_text(json.dumps(Account.encrypt(backend_support.anvil_key(3).key, "correct horse")))
    (tmp_path / "password").write_text("correct horse\n")
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(tmp_path / "password"))
    return path
