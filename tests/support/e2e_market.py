"""The whole market for end-to-end tests, with real parts only: anvil (the session chain) runs
the contracts; the backend (uvicorn in a thread, SQLite, indexer and dispatch on) follows the
chain and hands funded jobs to the provider's Celery queue on the private Redis; the provider
agent runs as a Celery worker process (tests/support/worker.py); the renter uses the
`unchained job` commands, keystore-signed as a person would. Used by tests/e2e/test_market_job.py
and tests/verifier/test_job_audit.py."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded
import httpx
import numpy as np
import pytest
import redis
import torch
from typer.testing import CliRunner

from backend.settings import Settings as BackendSettings
from client.broker import grant
from client.keystore import PASSWORD_FILE_ENV
from client.ports import free_port
from protocol.deployments import Deployment
from protocol.enums import JobStatus
from protocol.jobs import encode_output
from protocol.merkle import keccak256
from provider_agent.agent import Agent
from provider_agent.settings import Settings as ProviderSettings
from tests.support.accounts import dev_account, write_keystore
from tests.support.chain import SharedChain
from tests.support.served import serving
from tests.support.waiting import wait_until
from tests.support.worker import Worker
from tests.tiny_models import Tiny
from unchained_cli.chain import LocalChain
from unchained_cli.main import app
from devtools.market import DEV_MNEMONIC
from devtools.session import ChainSession

ETH = 10**18
PASSWORD = "e2e-test-password"
ANVIL_MNEMONIC = DEV_MNEMONIC
PROVIDER, RENTER, VERIFIER = 1, 3, 4  # anvil account indices
ITEMS = [np.random.default_rng(i).standard_normal(8).astype(np.float32) for i in range(6)]


def password_file(directory: Path) -> Path:
    path = directory / "password"
    path.write_text(PASSWORD + "\n")
    return path


def keystore(directory: Path, index: int) -> tuple[Path, str]:
    account = dev_account(index)
    return write_keystore(directory / f"account-{index}.json", account.key, PASSWORD), account.address


@dataclass
class Market:
    chain: LocalChain
    session: ChainSession
    deployment: Deployment
    deployment_file: Path
    backend_url: str
    backend_settings: BackendSettings
    broker_url: str  # the broker's admin: each party gets its own user (client.broker.grant)


_BACKEND_USERS: dict[str, str] = {}  # broker server (its run id) -> the backend's granted URL


def backend_url(broker_url: str) -> str:
    """The backend's user URL for `broker_url`'s database, granted once per server: granting it
    again would close the sessions of a backend still running on another database."""
    with redis.Redis.from_url(broker_url) as admin:
        server = str(admin.info("server")["run_id"])
    if server not in _BACKEND_USERS:
        _BACKEND_USERS[server] = grant(broker_url, "backend")
    return urlunsplit(urlsplit(_BACKEND_USERS[server])._replace(path=urlsplit(broker_url).path))


@contextmanager
def running_market(tmp_path_factory: pytest.TempPathFactory, broker_url: str, confirmations: int,
                   local: LocalChain, deployment: Deployment, deployment_file: Path) -> Iterator[Market]:
    """The backend served over the contracts on `local`, indexing and dispatching."""
    port = free_port()
    # The backend dispatches with its own broker user (push rights only) and signs with the
    # dispatch key, the deployer's (client.task_auth.dispatcher_of).
    keys = tmp_path_factory.mktemp("backend-key")
    settings = BackendSettings(
        data_dir=tmp_path_factory.mktemp("backend"), rpc_url=local.rpc_url, deployment_file=deployment_file,
        confirmations=confirmations, run_indexer=True, index_poll_seconds=0.1, dispatch=True,
        broker_url=backend_url(broker_url), public_url=f"http://127.0.0.1:{port}",
        keystore=keystore(keys, 0)[0], password_file=password_file(keys))
    with serving(settings, port) as url:
        yield Market(local, ChainSession.connect(local.rpc_url, deployment), deployment, deployment_file, url,
                     settings, broker_url)


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory, redis_url: str, shared_chain: SharedChain) -> Iterator[Market]:
    """The backend over the session chain as just deployed (block time: UNCHAINED_TEST_BLOCK_TIME)."""
    with running_market(tmp_path_factory, redis_url, 0, shared_chain.local, shared_chain.deployment,
                        shared_chain.deployment_file) as running:
        yield running


def pass_pog(market: Market, provider: str, verifier: str) -> None:
    """One passed Proof-of-GPU round for `provider` (the verifier from anvil's unlocked
    accounts), so that the backend quotes it to renters."""
    s = market.session
    s.send(s.contract("Staking").functions.stake(), verifier, value=5 * ETH)
    pog = s.contract("ProofOfGpu")
    secret = keccak256(b"e2e-secret-%d" % pog.functions.roundCount().call())
    s.send(pog.functions.requestRound(provider, 64, keccak256(secret)), verifier)
    round_id = pog.functions.roundCount().call()
    s.send(pog.functions.fixSeed(round_id, secret), verifier)
    count = s.contract("ProviderRegistry").functions.gpuCountOf(provider).call()
    s.send(pog.functions.commitRoots(round_id, [keccak256(b"root%d" % g) for g in range(count)]), provider)
    s.send(pog.functions.attest(round_id, 1234, b"CPU".ljust(32, b"\0"), 1000, True), verifier)


@dataclass
class Provider:
    settings: ProviderSettings
    address: str
    worker: Worker


@contextmanager
def running_provider(market: Market, tmp_path: Path, cheat: str | None = None, **overrides: object) -> Iterator[Provider]:
    """The provider registered (unless it is already), through a passed PoG round (so the
    backend quotes it), and its worker consuming its queue (with `cheat`: the cheater's worker,
    tests/support/worker.py)."""
    keystore_path, address = keystore(tmp_path, PROVIDER)
    values: dict[str, object] = dict(
        rpc_url=market.chain.rpc_url, keystore=keystore_path, password_file=password_file(tmp_path),
        deployments_dir=market.deployment_file.parent,
        broker_url=grant(market.broker_url, "provider", address),  # its own user: its own queue only
        backend_url=market.backend_url, data_dir=tmp_path / "provider", job_memory_bytes=3 << 30,
        job_timeout_s=30.0, stake_wei=2 * ETH, mining=False, upload_backoff_s=0.2)
    values.update(overrides)
    settings = ProviderSettings(**values)
    Agent.build(settings).register()
    pass_pog(market, address, market.session.accounts[VERIFIER])
    market.session.mine(market.backend_settings.confirmations)
    with httpx.Client(base_url=market.backend_url, timeout=10) as api:
        wait_until(lambda: api.get(f"/providers/{address.lower()}").json().get("pog_passed"), 20,
                   "the backend indexed the provider's passed PoG round")
    worker = Worker(settings, f"provider.{address.lower()}", tmp_path / "worker.log", cheat=cheat)
    try:
        yield Provider(settings, address, worker)
    finally:
        worker.stop()


def renter_cli(market: Market, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Callable[..., str], str]:
    """`unchained job ...` as the renter (its own keystore), returning the output; and its address."""
    keystore_path, address = keystore(tmp_path, RENTER)
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(password_file(tmp_path)))
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(app, ["job", *args, "--keystore", str(keystore_path), "--backend", market.backend_url],
                               terminal_width=200)
        assert result.exit_code == 0, result.output
        return " ".join(result.output.split())  # rich wraps long lines

    return run, address


def submit(market: Market, tmp_path: Path, job: Callable[..., str], provider: str,
           module: torch.nn.Module | None = None, *extra: str) -> int:
    """`job submit` of a tiny model (built here, Tiny by default) over ITEMS; returns the job id.
    With `--wait S` among `extra`, the command also says the provider's signed result came."""
    model = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(module or Tiny()), str(model))
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for i, item in enumerate(ITEMS):
        (inputs / f"item-{i}.bin").write_bytes(encode_output(item))
    said = job("submit", "--model", str(model), "--inputs", str(inputs), "--max-price", "0.05",
               "--provider", provider, "--batch-size", "4", "--tolerance-ppm", "1000",
               "--rpc", market.chain.rpc_url, "--deployment", str(market.deployment_file), *extra)
    job_id = int(re.search(r"job (\d+) funded", said).group(1))
    if "--wait" in extra:
        assert f"job {job_id}: result over {len(ITEMS)} items" in said and "signed by its provider" in said, said
    return job_id


def all_uploaded(api: httpx.Client, job_id: int) -> bool:
    response = api.get(f"/jobs/{job_id}/result")
    return response.status_code == 200 and all(i["digest"] for i in response.json()["items"])


def committed_and_uploaded(market: Market, api: httpx.Client, job_id: int) -> bool:
    """The job's signed result and every item at the backend, and its commit on-chain (the
    provider's committer sends it after the upload)."""
    state = market.session.contract("JobEscrow").functions.jobState(job_id).call()
    return state.status == JobStatus.COMMITTED and all_uploaded(api, job_id)

