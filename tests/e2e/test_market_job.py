"""A paid inference job through the whole market, with real parts only.

anvil runs the contracts; the backend (uvicorn in a thread, SQLite, indexer and dispatch on)
follows the chain and hands the funded job to the provider's Celery queue on a private Redis;
the provider agent runs as a Celery worker process that signs in to the backend with its own
keystore, fetches the spec, model and inputs, runs the model, commits the output root on-chain
and uploads every item with its Merkle proof; the renter uses the `unchained job` commands
(keystore-signed, as a person would) to submit the job and to fetch and verify the result.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded
import httpx
import numpy as np
import pytest
import torch
import uvicorn
from eth_account import Account
from sqlalchemy import create_engine, delete, func, select
from typer.testing import CliRunner

from backend import models as m
from backend.api.app import create_app
from backend.cli import job_app
from backend.settings import Settings as BackendSettings
from protocol.deployments import Deployment
from protocol.jobs import decode_output, encode_output, within_tolerance
from protocol.merkle import MerkleTree, keccak256, leaf_hash, verify_inclusion
from provider_agent.agent import Agent
from tests.tiny_models import Raises, Tiny
from provider_agent.chain import JobStatus
from client.keystore import PASSWORD_FILE_ENV
from provider_agent.settings import Settings as ProviderSettings
from unchained_cli.chain import LocalChain, block_time_from_env, free_port
from unchained_cli.deploy import Deployer, deploy_all, write_deployment
from unchained_cli.cheats import CHEAT_ENV
from unchained_cli.market import CHEATER_SITE, DEV_MNEMONIC, wait_for
from unchained_cli.session import ChainSession

REPO = Path(__file__).resolve().parents[2]
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
    Account.enable_unaudited_hdwallet_features()
    account = Account.from_mnemonic(ANVIL_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")
    path = directory / f"account-{index}.json"
    path.write_text(json.dumps(Account.encrypt(account.key, PASSWORD, kdf="scrypt", iterations=1 << 10)))
    return path, account.address


@dataclass
class Market:
    chain: LocalChain
    session: ChainSession
    deployment: Deployment
    deployment_file: Path
    backend_url: str
    backend_settings: BackendSettings
    broker_url: str


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A private redis-server on a free port (no persistence): no other run sees our queues."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis

    client = redis.Redis(port=port)
    assert wait_for(lambda: _pings(client), 10, 0.05), "redis-server did not start"
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


def _pings(client) -> bool:  # type: ignore[no-untyped-def]
    import redis

    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@contextmanager
def running_market(tmp_path_factory: pytest.TempPathFactory, broker_url: str, confirmations: int) -> Iterator[Market]:
    """anvil with the contracts, and the backend served over them, indexing and dispatching."""
    with LocalChain(port=free_port(), block_time=block_time_from_env()) as local:
        with local.mining_at_once():  # set-up; the parties below wait for blocks
            deployment = deploy_all(Deployer.connect(local.rpc_url))
        path = write_deployment(deployment, tmp_path_factory.mktemp("deployments"))
        port = free_port()
        settings = BackendSettings(
            data_dir=tmp_path_factory.mktemp("backend"), rpc_url=local.rpc_url, deployment_file=path,
            confirmations=confirmations, run_indexer=True, index_poll_seconds=0.1, dispatch=True,
            broker_url=broker_url, public_url=f"http://127.0.0.1:{port}")
        server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                               log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        assert wait_for(lambda: server.started, 30, 0.05), "the backend did not start"
        try:
            yield Market(local, ChainSession.connect(local.rpc_url, deployment), deployment, path,
                         f"http://127.0.0.1:{port}", settings, broker_url)
        finally:
            server.should_exit = True
            thread.join(timeout=10)


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[Market]:
    with running_market(tmp_path_factory, redis_url, confirmations=0) as running:
        yield running


# Far more blocks than come on their own while the lagging test looks (one per transaction on an
# instant chain, a block a second with UNCHAINED_TEST_BLOCK_TIME=1): only the blocks the test mines
# give the backend its confirmations.
LAG_BLOCKS = 120


@pytest.fixture(scope="module")
def lagging_market(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[Market]:
    """A backend that indexes a block only once LAG_BLOCKS more are mined: it sees the
    provider's commit only when the test mines them."""
    with running_market(tmp_path_factory, redis_url.removesuffix("/0") + "/1", confirmations=LAG_BLOCKS) as running:
        yield running


class Worker:
    """The provider agent's Celery worker as its own process, configured by environment; with
    `cheat`, the cheater's site first on its path and UNCHAINED_CHEAT set (unchained_cli/cheats.py),
    which its agent hands on to its model child (unchained_cli.cheats.plant_child_cheat)."""

    def __init__(self, settings: ProviderSettings, queue: str, log: Path, cheat: str | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        if cheat is not None:
            env.update({"PYTHONPATH": f"{CHEATER_SITE}{os.pathsep}{REPO}", CHEAT_ENV: cheat})
        for name, value in settings.model_dump().items():
            if value is not None:
                env[f"UNCHAINED_PROVIDER_{name.upper()}"] = str(value)
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "provider_agent.worker:app", "worker", "-Q", queue, "-P", "solo",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=open(log, "ab"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


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
def running_provider(market: Market, tmp_path: Path, **overrides: object) -> Iterator[Provider]:
    """The provider registered (unless it is already), through a passed PoG round (so the
    backend quotes it), and its worker consuming its queue."""
    keystore_path, address = keystore(tmp_path, PROVIDER)
    values: dict[str, object] = dict(
        rpc_url=market.chain.rpc_url, keystore=keystore_path, password_file=password_file(tmp_path),
        deployments_dir=market.deployment_file.parent, broker_url=market.broker_url,
        backend_url=market.backend_url, data_dir=tmp_path / "provider", job_memory_bytes=3 << 30,
        job_timeout_s=30.0, stake_wei=2 * ETH, mining=False, upload_backoff_s=0.2)
    values.update(overrides)
    settings = ProviderSettings(**values)
    Agent.build(settings).register()
    pass_pog(market, address, market.session.accounts[VERIFIER])
    market.session.mine(market.backend_settings.confirmations)
    with httpx.Client(base_url=market.backend_url, timeout=10) as api:
        assert wait_for(lambda: api.get(f"/providers/{address.lower()}").json().get("pog_passed"), 20), \
            "the backend never indexed the provider's passed PoG round"
    worker = Worker(settings, f"provider.{address.lower()}", tmp_path / "worker.log")
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
        result = runner.invoke(job_app, [*args, "--keystore", str(keystore_path), "--backend", market.backend_url],
                               terminal_width=200)
        assert result.exit_code == 0, result.output
        return " ".join(result.output.split())  # rich wraps long lines

    return run, address


def submit(market: Market, tmp_path: Path, job: Callable[..., str], provider: str,
           module: torch.nn.Module | None = None, *extra: str) -> int:
    """`job submit` of a tiny model (built here, Tiny by default) over ITEMS; returns the job id."""
    model = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(module or Tiny()), str(model))
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for i, item in enumerate(ITEMS):
        (inputs / f"item-{i}.bin").write_bytes(encode_output(item))
    said = job("submit", "--model", str(model), "--inputs", str(inputs), "--max-price", "0.05",
               "--provider", provider, "--batch-size", "4", "--tolerance-ppm", "1000",
               "--rpc", market.chain.rpc_url, "--deployment", str(market.deployment_file), *extra)
    return int(re.search(r"job (\d+) funded", said).group(1))


def all_uploaded(api: httpx.Client, job_id: int) -> bool:
    response = api.get(f"/jobs/{job_id}/result")
    return response.status_code == 200 and all(i["digest"] for i in response.json()["items"])


def fetch_and_check(market: Market, tmp_path: Path, job: Callable[..., str], job_id: int) -> bytes:
    """`job result` as the renter, then the same checks made here independently: every item
    proves inclusion under the on-chain root and is what the model computes. Returns the root."""
    root = market.session.contract("JobEscrow").functions.getJob(job_id).call()[10]
    out = tmp_path / "results"
    said = job("result", str(job_id), "--out", str(out))
    assert f"{len(ITEMS)} items verified against output root 0x{root.hex()}" in said
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"item-{i:06d}.out" for i in range(len(ITEMS))]
    outputs = [f.read_bytes() for f in files]
    tree = MerkleTree.from_leaves(keccak256(o) for o in outputs)
    assert tree.root == root
    for index, data in enumerate(outputs):
        verify_inclusion(leaf_hash(keccak256(data)), index, len(outputs), tree.proof(index), root)
    with torch.inference_mode():
        want = torch.tanh(Tiny().fc(torch.from_numpy(np.stack(ITEMS)))).numpy()
    for index, data in enumerate(outputs):
        assert within_tolerance(decode_output(data), want[index], 1000), index
    return root


def provider_sessions(market: Market, address: str, forget: bool = False) -> int:
    """The provider's sessions in the backend's database (`forget`: delete them first, as a
    backend that lost its sessions would)."""
    engine = create_engine(market.backend_settings.db_url)
    try:
        with engine.begin() as db:
            if forget:
                db.execute(delete(m.AuthSession).where(m.AuthSession.address == address.lower()))
            return db.execute(select(func.count()).select_from(m.AuthSession)
                              .where(m.AuthSession.address == address.lower())).scalar_one()
    finally:
        engine.dispose()


def test_renter_job_is_dispatched_run_uploaded_verified_and_paid(market: Market, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    job, renter = renter_cli(market, tmp_path, monkeypatch)
    api = httpx.Client(base_url=market.backend_url, timeout=10)
    with running_provider(market, tmp_path) as provider:
        job_id = submit(market, tmp_path, job, provider.address)
        assert wait_for(lambda: all_uploaded(api, job_id), 45), provider.worker.log.read_text()[-4000:]

    escrow = market.session.contract("JobEscrow")
    funded = escrow.functions.getJob(job_id).call()
    assert JobStatus(funded[8]) == JobStatus.COMMITTED
    assert (funded[0], funded[1], funded[11]) == (renter, provider.address, len(ITEMS))
    fetch_and_check(market, tmp_path, job, job_id)
    # The worker signed in once and reused the session for the content and every upload.
    assert provider_sessions(market, provider.address) == 1

    owed_before = escrow.functions.owedTo("0x" + "00" * 20, provider.address).call()
    market.session.advance(escrow.functions.challengeWindow().call() + 1)
    receipt = market.session.send(escrow.functions.finalize(job_id), renter)
    paid = escrow.events.JobFinalized().process_receipt(receipt)[0]["args"]
    assert paid["provider"] == provider.address and paid["providerAmount"] + paid["fee"] == funded[3] > 0
    assert JobStatus(escrow.functions.getJob(job_id).call()[8]) == JobStatus.FINALIZED
    assert escrow.functions.owedTo("0x" + "00" * 20, provider.address).call() == owed_before + paid["providerAmount"]
    assert wait_for(lambda: api.get(f"/jobs/{job_id}").json()["status"] == "finalized", 10)


def test_outputs_the_backend_cannot_take_yet_are_committed_and_uploaded_later(
        lagging_market: Market, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    market = lagging_market
    job, _ = renter_cli(market, tmp_path, monkeypatch)
    api = httpx.Client(base_url=market.backend_url, timeout=10)
    escrow = market.session.contract("JobEscrow")
    with running_provider(market, tmp_path, upload_attempts=1, upload_retry_s=0.5) as provider:
        job_id = submit(market, tmp_path, job, provider.address)
        market.session.mine(LAG_BLOCKS)  # the backend sees the funding and dispatches the job
        assert wait_for(lambda: JobStatus(escrow.functions.getJob(job_id).call()[8]) == JobStatus.COMMITTED, 30), \
            provider.worker.log.read_text()[-4000:]
        # The backend has not indexed the commit, so it refuses every item: the job stays
        # committed on-chain, its outputs on the provider's disk, the upload pending.
        log = provider.worker.log
        assert wait_for(lambda: "upload pending" in log.read_text(), 10), log.read_text()[-4000:]
        assert wait_for(lambda: log.read_text().count("unchained.provider.upload_outputs") >= 2, 15)
        assert api.get(f"/jobs/{job_id}/result").status_code == 409
        outputs_dir = provider.settings.outputs_dir / str(job_id)
        assert len(list(outputs_dir.glob("*.out"))) == len(ITEMS)
        # The backend forgets the provider's session meanwhile: the next try signs in again.
        assert provider_sessions(market, provider.address, forget=True) == 0
        market.session.mine(LAG_BLOCKS)  # now the backend sees the commit; the pending upload goes through
        assert wait_for(lambda: all_uploaded(api, job_id), 30), log.read_text()[-4000:]
        assert (outputs_dir / "uploaded").exists()
    assert log.read_text().count(f"signed in to {market.backend_url}") == 2
    assert provider_sessions(market, provider.address) == 1
    fetch_and_check(market, tmp_path, job, job_id)


def test_failure_and_mining_reports_reach_the_backend_signed_in_as_the_provider(
        market: Market, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job, _ = renter_cli(market, tmp_path, monkeypatch)
    api = httpx.Client(base_url=market.backend_url, timeout=10)
    with running_provider(market, tmp_path) as provider:
        # The dry run refuses a model that raises on the inputs before any money moves...
        (tmp_path / "checked").mkdir()
        with pytest.raises(AssertionError, match=r"cannot\s+run\s+your\s+input"):
            submit(market, tmp_path / "checked", job, provider.address, Raises())
        # ...so fund it without the check: the provider fails it on-chain and the renter is
        # refunded in the same transaction, long before the deadline.
        job_id = submit(market, tmp_path, job, provider.address, Raises(), "--no-check")
        assert wait_for(lambda: api.get(f"/jobs/{job_id}").json().get("failure_reason"), 45), \
            provider.worker.log.read_text()[-4000:]
    shown = api.get(f"/jobs/{job_id}").json()
    failure = shown["failure"]
    assert failure.startswith("model-error:") and "division by zero in layer 3" in failure
    assert shown["status"] == "refunded" and int(shown["refund"]) == int(shown["price"])
    escrow = market.session.contract("JobEscrow")
    assert JobStatus(escrow.functions.getJob(job_id).call()[8]) == JobStatus.REFUNDED

    agent = Agent.build(provider.settings.model_copy(update={"mining": True, "data_dir": tmp_path / "miner"}))
    assert agent.mining is not None
    floor = agent.publish_yield()
    public = api.get(f"/providers/{provider.address.lower()}").json()
    assert public["miner"] == agent.mining.miner.name
    assert public["hashrate"] == round(agent.mining.miner.hashrate(), 1)
    assert int(public["mining_floor_wei_per_hour"] or 0) >= floor
    # The agent's heartbeat reaches the backend signed in as the provider: it is shown alive.
    agent.beat()
    public = api.get(f"/providers/{provider.address.lower()}").json()
    assert public["last_seen_at"] is not None and public["available"] is True
