"""anvil restarted under a running market, as `unchained up` restarts it (devtools.up's
supervision: the same port, the chain loaded from its state file): the provider agent and the
verifier that were running go on with it, and a job submitted afterwards is run, committed,
audited and paid. Real processes (devtools.market, persistent): anvil, redis-server, backend,
`unchained provider run`, `unchained verifier run`."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch

from client.escrow_jobs import read_job_view
from devtools.market import ETH, FAST_PARAMS, LocalMarket, MarketPlan, ProviderPlan, dev_account, wait_for
from devtools.up import keep_up, supervised
from protocol.enums import JobStatus
from protocol.jobs import encode_output
from renter.client import BackendClient
from renter.orders import submit_job
from renter.wallet import Wallet
from tests.support.waiting import wait_until
from tests.tiny_models import Tiny

pytestmark = [pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed"),
              pytest.mark.e2e, pytest.mark.slow]

PLAN = MarketPlan(providers=(ProviderPlan("provider-a", 1, mining=False),), verifiers=(3,), renters=(4,),
                  params=FAST_PARAMS, pog_interval_s=3600.0)
ITEMS = [np.random.default_rng(i).standard_normal(8).astype(np.float32) for i in range(4)]


@pytest.fixture
def market(tmp_path: Path) -> Iterator[LocalMarket]:
    with LocalMarket(PLAN, tmp_path / "market", persistent=True) as started:
        yield started


def _kept_block(state: Path) -> int:
    try:
        return int(json.loads(state.read_text())["best_block_number"])
    except (OSError, ValueError, KeyError):
        return -1


def _status(market: LocalMarket, job_id: int) -> JobStatus:
    assert market.session is not None
    return JobStatus(read_job_view(market.session.contract("JobEscrow"), job_id).status)


def test_agent_and_verifier_go_on_after_anvil_restarts_and_a_job_runs(market: LocalMarket) -> None:
    provider = market.parties["provider-a"].address
    wait_until(lambda: market.api(f"/providers/{provider.lower()}").get("pog_passed"), 180,  # type: ignore[union-attr]
               "the verifier's PoG round of the provider passed")
    renter = dev_account(market.parties["renter-1"].account)
    client = BackendClient.connect(market.backend_url, renter)
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(Tiny()), buffer)
    model = client.push_model(buffer.getvalue(), "tiny", "torchscript", private=False)["content_hash"]

    anvil = market.chain.process
    assert anvil is not None
    state = market.chain.state
    assert state is not None
    block = market.session.web3.eth.block_number if market.session else 0
    wait_until(lambda: _kept_block(state) >= block, 15, "anvil keeps the latest block")  # every 2 s
    psutil.Process(anvil.pid).kill()  # a crash: the state it wrote last is what comes back
    anvil.wait()
    said: list[str] = []
    for service in supervised(market):  # what `up` does each half second
        keep_up(service, said.append)
    assert said[-1] == f"anvil at {market.chain.rpc_url} again", said
    assert market.session is not None and market.session.web3.eth.block_number >= block

    job = submit_job(client, Wallet(market.chain.rpc_url, renter, market.deployment_file), model,
                     [encode_output(item) for item in ITEMS], ETH // 20, provider=provider, batch_size=4,
                     tolerance_ppm=1000).job
    client.close()
    agent, verifier = market.services["provider-a"], market.services["verifier-1"]
    wait_until(lambda: _status(market, job.id) in (JobStatus.COMMITTED, JobStatus.FINALIZED), 120,
               f"the running agent commits job {job.id}:\n{agent.tail()}")
    wait_until(lambda: f"job {job.id}: audited items" in verifier.tail(10**7), 120,
               f"the running verifier audits job {job.id}:\n{verifier.tail()}")
    window_end = read_job_view(market.session.contract("JobEscrow"), job.id).challengeWindowEnd
    if market.session.now() <= window_end:
        market.session.advance(window_end - market.session.now() + 1)
    assert wait_for(lambda: _status(market, job.id) == JobStatus.FINALIZED, 120, 0.5), agent.tail()
    assert agent.alive and verifier.alive
