"""A paid inference job through the whole market, with real parts only (tests/support/e2e_market.py).

anvil runs the contracts; the backend (uvicorn in a thread, SQLite, indexer and dispatch on)
follows the chain and hands the funded job to the provider's Celery queue on a private Redis;
the provider agent runs as a Celery worker process that signs in to the backend with its own
keystore, fetches the spec, model and inputs, runs the model, hands the backend its signed result
and every item with its Merkle proof, and commits the output root on-chain behind that; the renter uses the `unchained job` commands
(keystore-signed, as a person would) to submit the job and to fetch and verify the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded
import httpx
import numpy as np
import pytest
import torch
from sqlalchemy import create_engine, func, select

from client.contracts import emitted
from client.escrow_jobs import read_job, read_job_view
from backend import models as m
from protocol.enums import JobStatus
from protocol.jobs import decode_output, within_tolerance
from protocol.merkle import MerkleTree, keccak256, leaf_hash, verify_inclusion
from provider_agent.agent import Agent
from tests.support.chain import SharedChain
# market: a fixture. ETH, Worker, keystore, password_file, pass_pog: re-exported for tests written
# against this module before tests/support existed; new tests import from tests.support.
from tests.support.e2e_market import (  # noqa: F401
    ETH,
    ITEMS,
    Market,
    Worker,
    all_uploaded,
    keystore,
    market,
    pass_pog,
    password_file,
    renter_cli,
    running_market,
    running_provider,
    submit,
)
from tests.tiny_models import Raises, Tiny
from unchained_cli.deploy import Deployer, deploy_all, write_deployment
from devtools.market import wait_for

# A block a second, every transaction waiting for it (UNCHAINED_TEST_BLOCK_TIME=0: mined at once).
pytestmark = [pytest.mark.e2e, pytest.mark.block_time]

# Far more blocks than come on their own while the lagging test looks (one per transaction on an
# instant chain, a block a second on the block-time chain): only the blocks the test mines
# give the backend its confirmations.
LAG_BLOCKS = 120


@pytest.fixture(scope="module")
def lagging_market(tmp_path_factory: pytest.TempPathFactory, redis_url: str,
                   shared_chain: SharedChain) -> Iterator[Market]:
    """A backend that indexes a block only once LAG_BLOCKS more are mined: it sees the
    provider's commit only when the test mines them. Its own contract set on the module's chain
    (the other backend runs at the same time, and neither must see the other's jobs)."""
    local = shared_chain.local
    with local.mining_at_once():
        deployment = deploy_all(Deployer.connect(local.rpc_url))
    path = write_deployment(deployment, tmp_path_factory.mktemp("lagging-deployment"))
    with running_market(tmp_path_factory, redis_url.removesuffix("/0") + "/1", LAG_BLOCKS, local, deployment,
                        path) as running:
        yield running


def fetch_and_check(market: Market, tmp_path: Path, job: Callable[..., str], job_id: int) -> bytes:
    """`job result` as the renter, then the same checks made here independently: every item
    proves inclusion under the on-chain root and is what the model computes. Returns the root."""
    root = read_job_view(market.session.contract("JobEscrow"), job_id).outputRoot
    out = tmp_path / "results"
    said = job("result", str(job_id), "--out", str(out), "--rpc", market.chain.rpc_url,
               "--deployment", str(market.deployment_file))
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


def provider_sessions(market: Market, address: str) -> int:
    """The provider's sessions in the backend's database."""
    engine = create_engine(market.backend_settings.db_url)
    try:
        with engine.begin() as db:
            return db.execute(select(func.count()).select_from(m.AuthSession)
                              .where(m.AuthSession.address == address.lower())).scalar_one()
    finally:
        engine.dispose()


def test_renter_job_is_dispatched_run_uploaded_verified_and_paid(market: Market, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    job, renter = renter_cli(market, tmp_path, monkeypatch)
    api = httpx.Client(base_url=market.backend_url, timeout=10)
    escrow = market.session.contract("JobEscrow")
    with running_provider(market, tmp_path) as provider:
        job_id = submit(market, tmp_path, job, provider.address, None, "--wait", "60")  # the signed result, long-polled
        assert wait_for(lambda: all_uploaded(api, job_id), 45), provider.worker.log.read_text()[-4000:]
        # The result was signed by the provider and available before (or as) the commit went out.
        signed = api.get(f"/jobs/{job_id}/result").json()["signed"]
        assert signed["provider"] == provider.address.lower() and signed["itemCount"] == len(ITEMS)
        assert wait_for(lambda: escrow.functions.jobState(job_id).call().status == JobStatus.COMMITTED, 30), \
            provider.worker.log.read_text()[-4000:]

    funded = read_job_view(escrow, job_id)
    assert funded.status == JobStatus.COMMITTED
    assert (funded.renter, funded.provider, funded.itemCount) == (renter, provider.address, len(ITEMS))
    fetch_and_check(market, tmp_path, job, job_id)
    # The worker signed in once and reused the session for the content and every upload.
    assert provider_sessions(market, provider.address) == 1

    owed_before = escrow.functions.owedTo("0x" + "00" * 20, provider.address).call()
    market.session.advance(escrow.functions.challengeWindow().call() + 1)
    receipt = market.session.send(escrow.functions.finalize(read_job(escrow, job_id).as_tuple()), renter)
    paid = emitted(escrow, "JobFinalized", receipt)[0]["args"]
    assert paid["provider"] == provider.address and paid["providerAmount"] + paid["fee"] == funded.price > 0
    assert read_job_view(escrow, job_id).status == JobStatus.FINALIZED
    assert escrow.functions.owedTo("0x" + "00" * 20, provider.address).call() == owed_before + paid["providerAmount"]
    assert wait_for(lambda: api.get(f"/jobs/{job_id}").json()["status"] == "finalized", 10)


def test_the_signed_result_reaches_the_renter_before_the_backend_sees_the_commit(
        lagging_market: Market, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    market = lagging_market
    job, _ = renter_cli(market, tmp_path, monkeypatch)
    api = httpx.Client(base_url=market.backend_url, timeout=10)
    escrow = market.session.contract("JobEscrow")
    with running_provider(market, tmp_path) as provider:
        job_id = submit(market, tmp_path, job, provider.address)
        market.session.mine(LAG_BLOCKS)  # the backend sees the funding and dispatches the job
        log = provider.worker.log
        # The renter has every item, checked against the root the provider signed, while the
        # backend has not indexed any commit (it may not even be mined yet).
        assert wait_for(lambda: all_uploaded(api, job_id), 60), log.read_text()[-4000:]
        early = api.get(f"/jobs/{job_id}/result").json()
        assert early["committed"] is False and early["signed"]["provider"] == provider.address.lower()
        assert early["result_available_at"] is not None and early["commit_matches_signed"] is None
        said = job("result", str(job_id), "--out", str(tmp_path / "early"),  # the renter, checking the signature
                   "--rpc", market.chain.rpc_url, "--deployment", str(market.deployment_file))
        assert f"verified against output root {early['output_root']}" in said
        assert "on-chain commit is pending" in said or api.get(f"/jobs/{job_id}/result").json()["committed"]
        # The committer puts it on-chain behind the delivery.
        assert wait_for(lambda: escrow.functions.jobState(job_id).call().status == JobStatus.COMMITTED, 60), \
            f"job {job_id} not committed; the worker's log:\n" + log.read_text()[-4000:]
        assert api.get(f"/jobs/{job_id}/result").json()["committed"] is False
        market.session.mine(LAG_BLOCKS)  # now the backend sees the commit: the signed result's root
        assert wait_for(lambda: api.get(f"/jobs/{job_id}/result").json()["committed"], 30)
    late = api.get(f"/jobs/{job_id}/result").json()
    assert late["commit_matches_signed"] is True and late["output_root"] == early["output_root"]
    assert late["signed"] == early["signed"]
    assert fetch_and_check(market, tmp_path, job, job_id).hex() == early["output_root"][2:]


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
    assert read_job_view(escrow, job_id).status == JobStatus.REFUNDED

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
