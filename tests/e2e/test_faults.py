"""Faults on the whole market, with real processes only (devtools.market): a provider agent
killed mid-job, the broker restarted mid-run, the backend's database deleted and rebuilt from the
chain's events, a verifier offline during a challenge window.

Each test ends the same way: every job it created is committed once and settled exactly once
on-chain (one JobFinalized, JobExpired, JobCancelled or at-fault JobUnfrozen event), the renter
paid once, the provider and the treasury earned once, nobody was challenged or slashed, and no wei
is unaccounted for since the market started (balances before = after + gas, counting what the
contracts hold).

One market serves the module: starting it (anvil, contracts, broker, backend, two agents that stake
and pass a Proof-of-GPU round) costs most of a minute. Its verifier runs one PoG round per
provider when it starts and no more for an hour (a round mid-fault would only add noise). A
job's challenge window stays open until the verifier has audited the job, then the test ends it
on the chain's clock (wait_settled), so that a job settles in seconds of real time.
"""

from __future__ import annotations

import io
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, replace

import httpx
import numpy as np
import pytest
import torch

from renter.client import BackendClient
from renter.orders import submit_job
from renter.wallet import Wallet
from client.escrow_jobs import read_job_view
from protocol.escrow_job import EscrowJob
from protocol.enums import JobStatus
from protocol.jobs import encode_output
from tests.support.chain import BLOCK_TIME_S
from tests.tiny_models import Slow, Tiny
from devtools.market import (ETH, FAST_PARAMS, ZERO_ADDRESS, Ledger, LocalMarket, MarketPlan, ProviderPlan,
                                  dev_account, plan_from_env, wait_for)

pytestmark = [pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed"),
              pytest.mark.e2e, pytest.mark.slow, pytest.mark.block_time]

CHALLENGE_WINDOW = 30  # long enough for a restarted verifier (its start-up takes seconds) to audit a job
# A block a second, every transaction waiting for it (UNCHAINED_TEST_BLOCK_TIME=0: mined at once).
PLAN = plan_from_env(MarketPlan(
    providers=(ProviderPlan("provider-a", 1, mining=False), ProviderPlan("provider-b", 2, mining=False)),
    verifiers=(3,), renters=(4, 5), params=replace(FAST_PARAMS, challenge_window=CHALLENGE_WINDOW),
    pog_interval_s=3600.0), default_block_time=BLOCK_TIME_S)
ITEMS = [np.random.default_rng(i).standard_normal(8).astype(np.float32) for i in range(4)]
MAX_PRICE = ETH // 20
SETTLE_TIMEOUT = 90  # run and commit, or audit, or the agent's next heartbeat; on a busy CI box


@dataclass
class Faults:
    market: LocalMarket
    ledger: Ledger
    models: dict[str, str]  # name -> content hash in the model hub


def scripted(module: torch.nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buffer)
    return buffer.getvalue()


def push_models(market: LocalMarket) -> dict[str, str]:
    """The test models in the hub (public): a fast one, and one that computes for seconds."""
    client = renter_client(market, "renter-1")
    models = {name: client.push_model(scripted(module), name, "torchscript", private=False)["content_hash"]
              for name, module in (("tiny", Tiny()), ("slow", Slow(100_000)))}  # seconds a job: the kill must land while it runs
    client.close()
    return models


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faults]:
    with LocalMarket(PLAN, tmp_path_factory.mktemp("market")) as market:
        for provider in market.providers():
            assert wait_for(lambda: market.api(f"/providers/{provider.address.lower()}").get("pog_passed"), 180, 1), \
                market.services["verifier-1"].tail()
        yield Faults(market, market.ledger().open(), push_models(market))


@dataclass
class Books:
    """The money that moves during one test: balances and gas, and what the escrow owes each
    provider (earnings of jobs that others finalized stay there while the provider's agent runs)."""

    ledger: Ledger
    owed: dict[str, int]  # provider address -> wei


@pytest.fixture
def books(faults: Faults) -> Books:
    market = faults.market
    return Books(market.ledger().open(), {p.address: escrow_owed(market, p.address) for p in market.providers()})


def renter_client(market: LocalMarket, renter: str) -> BackendClient:
    return BackendClient.connect(market.backend_url, dev_account(market.parties[renter].account))


def submit(market: LocalMarket, renter: str, provider: str, model_hash: str) -> EscrowJob:
    """A renter's job over ITEMS on `provider`, funded from the renter's own wallet."""
    account = dev_account(market.parties[renter].account)
    client = renter_client(market, renter)
    try:
        return submit_job(client, Wallet(market.chain.rpc_url, account, market.deployment_file), model_hash,
                          [encode_output(item) for item in ITEMS], MAX_PRICE,
                          provider=market.parties[provider].address, batch_size=4, tolerance_ppm=1000).job
    finally:
        client.close()


def chain_status(market: LocalMarket, job_id: int) -> JobStatus:
    return JobStatus(read_job_view(market.session.contract("JobEscrow"), job_id).status)


def events(market: LocalMarket, contract: str, event: str, **filters: object) -> list:
    return list(getattr(market.session.contract(contract).events, event)().get_logs(
        from_block=0, argument_filters=filters or None))


def settlements(market: LocalMarket, job_id: int) -> int:
    """Events that settle a job's escrow: paid out, refunded at the deadline, cancelled, or
    failed by the provider, or refunded after a dispute found the provider at fault."""
    count = sum(len(events(market, "JobEscrow", name, jobId=job_id))
                for name in ("JobFinalized", "JobExpired", "JobCancelled", "JobFailed"))
    return count + sum(e.args.providerAtFault for e in events(market, "JobEscrow", "JobUnfrozen", jobId=job_id))


def wait_settled(market: LocalMarket, job_id: int, provider: str) -> None:
    """The job committed and audited by the verifier inside its challenge window; then the window
    ends on the chain's clock (evm_increaseTime: the agent and the contract read chain time)
    instead of being waited out, and the provider's agent finalizes at its next heartbeat."""
    assert wait_for(lambda: chain_status(market, job_id) == JobStatus.COMMITTED or
                    chain_status(market, job_id) == JobStatus.FINALIZED, SETTLE_TIMEOUT, 0.2), \
        f"job {job_id} is {chain_status(market, job_id).name}:\n{market.services[provider].tail()}"
    verifier = market.services["verifier-1"]
    assert wait_for(lambda: f"job {job_id}: audited items" in verifier.log_path.read_text(errors="replace"),
                    SETTLE_TIMEOUT, 0.2), f"job {job_id} was not audited:\n{verifier.tail()}"
    window_end = read_job_view(market.session.contract("JobEscrow"), job_id).challengeWindowEnd
    if market.session.now() <= window_end:
        market.session.advance(window_end - market.session.now() + 1)
    assert wait_for(lambda: chain_status(market, job_id) == JobStatus.FINALIZED, SETTLE_TIMEOUT, 0.2), \
        f"job {job_id} is {chain_status(market, job_id).name}:\n{market.services[provider].tail()}"


def escrow_owed(market: LocalMarket, address: str) -> int:
    return market.session.contract("JobEscrow").functions.owedTo(ZERO_ADDRESS, address).call()


def assert_paid_once(f: Faults, books: Books, job: EscrowJob, renter: str) -> None:
    """Committed once, settled once; the renter paid the price once (and gas), the provider
    earned its share and the treasury its fee of this job, once. Then the renters and the
    treasury withdraw (the agents and verifiers stay up, and a second sender on their accounts
    would race them for nonces: their earnings stay in the contracts, which the ledger counts):
    after all the faults so far, no wei is unaccounted for."""
    market = f.market
    assert len(events(market, "JobEscrow", "ResultCommitted", jobId=job.id)) == 1
    assert settlements(market, job.id) == 1
    [paid] = events(market, "JobEscrow", "JobFinalized", jobId=job.id)
    assert paid.args.providerAmount + paid.args.fee == job.price
    # A provider's pay reaches its wallet when its agent finalizes (finalizeJobsAndWithdraw, with
    # whatever else the escrow owed it), or stays owed when another party finalized.
    settled, names = books.ledger.close(), {party.address: name for name, party in market.parties.items()}
    earned = {a: escrow_owed(market, a) - owed + settled.change(names[a]) + settled.gas[names[a]]
              for a, owed in books.owed.items()}
    assert earned == {a: paid.args.providerAmount if a == paid.args.provider else 0 for a in books.owed}
    assert escrow_owed(market, market.parties["treasury"].address) == paid.args.fee  # earlier tests withdrew theirs
    market.withdraw_all([n for n in market.parties if n.startswith("renter-") or n == "treasury"])
    test = books.ledger.close()
    assert test.change(renter) + test.gas[renter] == -job.price
    assert test.unaccounted == 0 and f.ledger.close().unaccounted == 0, test

    assert not events(market, "Staking", "Slashed"), "nobody cheated, nobody may be slashed"
    assert not events(market, "ChallengeManager", "JobChallenged"), "no job was wrong, none may be challenged"
    staking = market.session.contract("Staking")
    stakes = {**{p.address: PLAN.provider_stake_wei for p in market.providers()},
              market.parties["verifier-1"].address: PLAN.verifier_stake_wei}
    assert {a: staking.functions.stakeOf(a).call() for a in stakes} == stakes


def provider_log_count(market: LocalMarket, provider: str, text: str) -> int:
    return market.services[provider].log_path.read_text(errors="replace").count(text)


# -- the faults --------------------------------------------------------------------------------


def test_provider_killed_mid_job_resumes_and_commits_and_is_paid_once(faults: Faults, books: Books) -> None:
    market = faults.market
    job = submit(market, "renter-1", "provider-a", faults.models["slow"])
    outputs = market.provider_data("provider-a") / "outputs" / str(job.id)
    running = f"job {job.id}: model child of sandbox"
    assert wait_for(lambda: provider_log_count(market, "provider-a", running), 60, 0.1), \
        market.services["provider-a"].tail()

    market.services["provider-a"].stop(kill=True)  # SIGKILL to the agent's group: worker and model child
    assert chain_status(market, job.id) == JobStatus.FUNDED and not outputs.exists(), \
        "the kill came too late: the model had finished"
    market.start_provider("provider-a")
    market.wait_provider("provider-a")
    wait_settled(market, job.id, "provider-a")

    assert provider_log_count(market, "provider-a", f"job {job.id}: started by a process that is gone") == 1
    assert len(events(market, "JobEscrow", "ResultCommitted", jobId=job.id)) == 1
    assert_paid_once(faults, books, job, "renter-1")


def test_job_funded_while_the_broker_is_down_is_dispatched_when_it_returns(faults: Faults, books: Books) -> None:
    market = faults.market
    backend_log = market.services["backend"].log_path
    market.broker.stop()
    try:
        job = submit(market, "renter-2", "provider-b", faults.models["tiny"])
        refused = f"job {job.id}: broker unavailable, will retry dispatch"
        assert wait_for(lambda: refused in backend_log.read_text(errors="replace"), 60, 0.5), \
            market.services["backend"].tail()
        assert chain_status(market, job.id) == JobStatus.FUNDED
    finally:
        market.broker.start()  # the same port: every client reconnects to it
    wait_settled(market, job.id, "provider-b")

    # The backend's own message (its task id names the job), sent again once the broker was back.
    assert provider_log_count(market, "provider-b", f"job {job.id}: signed (delivery run-job-{job.id},") == 1
    assert_paid_once(faults, books, job, "renter-2")


# The provider's signed result is off-chain too: a rebuilt backend has it again when the agent
# delivers it again, at a new result_available_at.
ON_CHAIN_ONLY = {"jobs": {"spec", "dispatched_to", "failure", "signed_output_root", "result_available_at",
                          "commit_matches_signed"},
                 "providers": {"cached_models", "private_ok", "latency_ms", "mining_floor_wei_per_hour", "miner",
                               "hashrate", "last_seen_at", "available", "why_not"},  # heartbeats: off-chain
                 "pog/rounds": {"devices"}}  # each device's NVML identity and attestation: the verifier's report


def provider_of(market: LocalMarket, job_id: int) -> str:
    address = read_job_view(market.session.contract("JobEscrow"), job_id).provider
    return next(p.name for p in market.providers() if p.address == address)


def index(market: LocalMarket) -> dict[str, list[dict]]:
    """What the backend's index shows of the chain (its off-chain fields left out)."""
    return {path: [{k: v for k, v in row.items() if k not in skip} for row in market.api(f"/{path}")]
            for path, skip in ON_CHAIN_ONLY.items()}


def index_difference(now: dict[str, list[dict]], before: dict[str, list[dict]]) -> list[tuple[str, dict, dict]]:
    """The first differing fields of each path's rows, for a readable failure."""
    out = []
    for path in before:
        for row, old in zip(now[path], before[path]):
            if row != old:
                keys = {k for k in row.keys() | old.keys() if row.get(k) != old.get(k)}
                out.append((path, {k: row.get(k) for k in keys}, {k: old.get(k) for k in keys}))
                break
        if len(now[path]) != len(before[path]):
            out.append((path, {"rows": len(now[path])}, {"rows": len(before[path])}))
    return out


def test_backend_database_deleted_is_rebuilt_from_the_chain_without_paying_twice(faults: Faults, books: Books) -> None:
    market = faults.market
    escrow = market.session.contract("JobEscrow")
    earlier = list(range(1, escrow.functions.jobCount().call() + 1))
    assert earlier and all(chain_status(market, j) == JobStatus.FINALIZED for j in earlier)
    before = index(market)
    redelivered = {j: provider_log_count(market, provider_of(market, j), f"job {j}: already committed on-chain")
                   for j in earlier}

    market.services["backend"].stop()
    for path in market.backend_data.glob("backend.db*"):
        path.unlink()
    market.start_backend()
    assert wait_for(lambda: index(market) == before, 60, 1), index_difference(index(market), before)

    # Every job is on the chain as the index says, and no redelivered job ran or was paid again.
    for job_id, row in zip(earlier, sorted(before["jobs"], key=lambda r: r["job_id"]), strict=True):
        root = read_job_view(escrow, job_id).outputRoot
        assert (row["status"], row["output_root"]) == ("finalized", "0x" + root.hex())
    pog = market.session.contract("ProofOfGpu")
    assert len(before["pog/rounds"]) == pog.functions.roundCount().call()
    assert {p["address"] for p in before["providers"]} == {p.address.lower() for p in market.providers()}
    for job_id in earlier:  # the rebuilt index dispatches every job again: its agent does nothing
        provider = provider_of(market, job_id)
        assert wait_for(lambda: provider_log_count(market, provider, f"job {job_id}: already committed on-chain")
                        > redelivered[job_id], 60, 0.5), market.services[provider].tail()
        assert len(events(market, "JobEscrow", "ResultCommitted", jobId=job_id)) == 1
        assert settlements(market, job_id) == 1
        # The outputs went with the database; the agent sends them again, so renters keep their results.
        assert wait_for(lambda: all(i["digest"] for i in market.api(f"/jobs/{job_id}/result")["items"]), 60, 0.5), \
            market.services[provider].tail()

    # The rebuilt backend takes new work: the hub and the specs are gone with the database, so
    # the renter pushes its model again; the agent signs in again.
    models = push_models(market)
    job = submit(market, "renter-1", "provider-b", models["tiny"])
    wait_settled(market, job.id, "provider-b")
    assert_paid_once(faults, books, job, "renter-1")


def audits_passed(market: LocalMarket) -> float:
    """Job audits the running verifier process found right (its Prometheus counter)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{market.metrics_ports['verifier-1']}/metrics", timeout=2).text
    except httpx.HTTPError:
        return 0.0
    found = re.search(r'^unchained_verifier_job_events_total\{event="passed"\} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_verifier_offline_in_a_challenge_window_resumes_from_the_chain(faults: Faults, books: Books) -> None:
    market = faults.market
    job = submit(market, "renter-2", "provider-a", faults.models["tiny"])
    assert wait_for(lambda: chain_status(market, job.id) == JobStatus.COMMITTED, 60, 0.2), \
        market.services["provider-a"].tail()

    market.services["verifier-1"].stop(kill=True)  # a crash inside the job's challenge window
    window_end = read_job_view(market.session.contract("JobEscrow"), job.id).challengeWindowEnd
    assert market.session.now() < window_end
    service = market.start_verifier("verifier-1")
    # Back, it finds the job from the chain's events and audits it inside the window (the only
    # job it audits: every earlier one is finalized).
    assert wait_for(lambda: audits_passed(market) == 1, CHALLENGE_WINDOW + 30, 0.5), service.tail()
    wait_settled(market, job.id, "provider-a")

    assert not events(market, "ChallengeManager", "JobChallenged", jobId=job.id)
    assert_paid_once(faults, books, job, "renter-2")
