"""The agent signs only results it can honour (issue 32, "Honest parties never lose"): a signed
result is evidence the renter can slash with, so the agent signs only when its commit can land
before the deadline (commitBy = chain time + its commit margin, before the deadline), while its
stake is bonded at the minimum and nothing of it is unbonding; otherwise the job is failed and
the renter refunded with nothing released. On a chain with a block a second, where a commit
waits for its block."""

from __future__ import annotations

import numpy as np
import pytest
from eth_account import Account

from protocol.enums import JobStatus
from provider_agent import jobs as jobs_module
from provider_agent.agent import Agent
from tests.support.models import save_torchscript
from tests.support.provider_market import Market
from tests.support.waiting import wait_until
from tests.tiny_models import Tiny
from devtools.session import ChainSession

ITEMS = [np.random.default_rng(i).standard_normal(8).astype(np.float32) for i in range(4)]
BLOCK_TIME_S = 1


@pytest.fixture(scope="module")
def market(chains) -> Market:  # type: ignore[no-untyped-def]
    """The session's chain with a block a second, as just deployed (provider 1, renter 3, verifier 4)."""
    shared = chains.get(block_time=BLOCK_TIME_S)
    session = ChainSession.connect(shared.rpc_url, shared.deployment)
    accounts = session.accounts
    return Market(shared.local, session, shared.deployment_file.parent, accounts[1], accounts[3], accounts[4])


@pytest.fixture(scope="module")
def agent(settings_for_module) -> Agent:
    agent = Agent.build(settings_for_module)
    agent.register()
    return agent


@pytest.fixture(scope="module")
def settings_for_module(market, keystore, password_file, tmp_path_factory):  # type: ignore[no-untyped-def]
    from provider_agent.settings import Settings

    root = tmp_path_factory.mktemp("agent")
    (root / "content").mkdir()
    return Settings(rpc_url=market.chain.rpc_url, keystore=keystore, password_file=password_file,
                    deployments_dir=market.deployments_dir, content_dir=root / "content", data_dir=root / "data",
                    job_memory_bytes=3 << 30, job_timeout_s=30.0, stake_wei=2 * 10**18, mining=False)


def _no_signature_released(agent: Agent, job_id: int) -> None:
    record = agent.jobs.store.get(job_id)
    assert record.signature is None and agent.jobs.signed_result(job_id) is None
    assert agent.committer.commit_signed() == []


def _refunded(agent: Agent, market: Market, job_id: int) -> None:
    """Refunded in full (failJob at once, or refundExpired once the deadline passed)."""
    wait_until(lambda: agent.jobs.refund_failed() is not None
               and agent.chain.job(job_id).status == JobStatus.REFUNDED, timeout=30,
               what=f"job {job_id} refunded", interval=0.5)


def _settle_open_work(agent: Agent) -> None:
    """Finalizes the jobs committed so far: open work forbids unbonding."""
    escrow = agent.chain.contract("JobEscrow")
    if escrow.functions.lockedWorkOf(agent.chain.address).call():
        agent.chain.web3.provider.make_request("evm_increaseTime", [escrow.functions.challengeWindow().call() + 1])
        agent.chain.web3.provider.make_request("evm_mine", [])
        assert agent.committer.finalize_due()
        assert escrow.functions.lockedWorkOf(agent.chain.address).call() == 0


def _unbond_one_wei(agent: Agent) -> None:
    agent.chain.send(agent.chain.contract("Staking").functions.requestUnbond(1), "requestUnbond 1 wei")


def test_a_job_due_one_second_after_its_funding_block_is_not_signed(agent, market):
    """Attack: the renter funds a job due one second after its funding block; the agent checked
    the deadline against the chain time read when the job started, with no margin, signed and
    delivered; its commit reverted (JobEscrowDeadlinePassed), it refunded the renter, and the
    renter slashed it with its own signature (5 of 5 tries). Now no result is signed: the commit
    could not be promised before the deadline."""
    content = agent.settings.content_dir
    model = save_torchscript(Tiny(), content)
    job_id, _ = market.create_job(content, model, ITEMS, deadline_in=2)  # mined a second later: due 1 s after
    outcome = agent.jobs.process(market.dispatched(job_id))
    assert outcome.status in ("refunded", "failed") and ("no time to commit" in outcome.error
                                                         or "deadline passed" in outcome.error)
    _no_signature_released(agent, job_id)
    _refunded(agent, market, job_id)
    assert agent.chain.stake_of() == 2 * 10**18  # nothing to slash with, nothing slashed


def test_a_result_is_signed_with_a_commit_margin_and_committed_before_it(agent, market):
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS, deadline_in=600)
    assert agent.jobs.process(market.dispatched(job_id)).status == "signed"
    signed = agent.jobs.signed_result(job_id)
    deadline = market.dispatched(job_id).deadline
    assert signed.result.binding(deadline)
    margin = agent.jobs.commit_margin_s
    assert margin == agent.settings.commit_latency_s + agent.settings.commit_interval_s
    assert signed.result.commit_by >= market.session.now() + margin - 2  # promised from the time of signing
    assert Account._recover_hash(signed.result.digest(agent.chain.escrow_domain()), signature=signed.signature) \
        == agent.chain.address
    assert agent.committer.commit_signed() == [job_id]
    assert agent.chain.job(job_id).status == JobStatus.COMMITTED
    escrow = market.session.contract("JobEscrow")
    [log] = escrow.events.ResultCommitted().get_logs(from_block=0, argument_filters={"jobId": job_id})
    assert market.session.web3.eth.get_block(log.blockNumber).timestamp <= signed.result.commit_by


def test_a_job_too_close_to_its_deadline_for_the_margin_is_not_signed(agent, market):
    content = agent.settings.content_dir
    margin = int(agent.jobs.commit_margin_s)
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS, deadline_in=margin // 2)
    outcome = agent.jobs.process(market.dispatched(job_id))
    assert outcome.status == "refunded" and "no time to commit" in outcome.error
    _no_signature_released(agent, job_id)
    escrow = market.session.contract("JobEscrow")
    [failed] = escrow.events.JobFailed().get_logs(from_block=0, argument_filters={"jobId": job_id})
    assert "no time to commit" in failed.args.reason  # refunded at once, before the deadline


def test_an_unbonding_provider_signs_nothing(agent, market):
    """Attack: a provider leaving (unbonding) or drained below the minimum still signed and
    delivered; its commit was refused (StakingBelowMinimum) and its failJob refunded the renter,
    who kept a result it never paid for. The agent reads Staking.isBondedFor beside the work."""
    _settle_open_work(agent)
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS, deadline_in=600)
    staking = agent.chain.contract("Staking")
    _unbond_one_wei(agent)  # after the funding: allowed
    try:
        outcome = agent.jobs.process(market.dispatched(job_id))
        assert outcome.status == "refunded" and "stake cannot back" in outcome.error
        _no_signature_released(agent, job_id)
        assert agent.chain.job(job_id).status == JobStatus.REFUNDED
    finally:
        market.session.advance(staking.functions.unbondingDelay().call())
        agent.chain.withdraw_unbonded()
        agent.chain.stake(1)


@pytest.mark.parametrize("fresh_s, signed", [(-1.0, False), (1e9, True)])
def test_a_view_grown_old_during_the_run_is_read_again_before_signing(agent, market, monkeypatch, fresh_s, signed):
    """The stake is checked beside the work; a provider that starts unbonding while a long job
    runs is caught by the read made again before signing (here every read counts as old)."""
    _settle_open_work(agent)
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS, deadline_in=600)
    staking = agent.chain.contract("Staking")
    monkeypatch.setattr(jobs_module, "VIEW_FRESH_S", fresh_s)

    def unbond_after_the_run(_job_id: int, _items: int, _seconds: float) -> None:
        _unbond_one_wei(agent)

    agent.jobs.activity.finished.append(unbond_after_the_run)
    try:
        outcome = agent.jobs.process(market.dispatched(job_id))
    finally:
        agent.jobs.activity.finished.remove(unbond_after_the_run)
        market.session.advance(staking.functions.unbondingDelay().call())
        agent.chain.withdraw_unbonded()
        agent.chain.stake(1)
    assert (outcome.status == "signed") is signed
    if not signed:
        _no_signature_released(agent, job_id)


def test_leaving_commits_the_signed_results_before_any_stake_unbonds(agent, market):
    """Attack on an honest provider by its own `provider leave`: unbonding while a signed result
    waited for its batched commit made that commit fail (below the minimum) and the result
    slashable. Leaving commits it first; the unbond then waits for the job's settlement."""
    _settle_open_work(agent)
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS, deadline_in=600)
    assert agent.jobs.process(market.dispatched(job_id)).status == "signed"
    with pytest.raises(Exception, match="StakingWorkOpen"):
        agent.leave()
    assert agent.chain.job(job_id).status == JobStatus.COMMITTED
    assert agent.chain.contract("Staking").functions.unbondingOf(agent.chain.address).call().amount == 0
    _settle_open_work(agent)
    agent.leave()  # settled: now it leaves
    assert agent.chain.contract("Staking").functions.unbondingOf(agent.chain.address).call().amount > 0
