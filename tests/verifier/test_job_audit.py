"""Job audits with real parts only: anvil, the backend (indexing, dispatching), a private Redis,
the provider agent's Celery worker, and verifiers signing with their own keys.

An honest job is audited and left alone, and a verifier who claims a false mismatch against it
loses the committee vote and its slash; a provider whose results are garbage for 20% of its
items is challenged, escalated, voted at fault by another verifier and slashed, and its renter
refunded. The cheating provider runs the real worker with the attack planted in its model
child (a `sitecustomize` on its path that corrupts every fifth item before it is committed).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from client.backend_http import BackendRefused, BackendUnavailable
from client.escrow_jobs import read_job, read_job_view
from client.ports import free_port
from protocol.enums import ChallengeStatus, JobStatus
from protocol.jobs import JobSpec
from protocol.merkle import keccak256
from provider_agent.agent import Agent
from tests.support.accounts import dev_account
from tests.support.e2e_market import (  # noqa: F401  (market: a fixture)
    ETH,
    ITEMS,
    Market,
    committed_and_uploaded,
    market,
    renter_cli,
    running_provider,
    submit,
)
from tests.support.waiting import wait_until
from verifier.backend_client import VerifierBackend
from verifier.chain import VerifierChain
from verifier.committee import CommitteeMember
from verifier.job_audit import JobAuditor, JobReexecutor
from verifier.reexec import ReexecLimits
from verifier.service import VerifierService
from verifier.settings import Settings

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUDITOR, VOTER, LIAR, UNSTAKED = 5, 6, 7, 8  # anvil account indices


def staked_verifier(market: Market, index: int, tmp_path: Path) -> tuple[VerifierChain, VerifierBackend, JobReexecutor]:
    account = dev_account(index)
    chain = VerifierChain.connect(market.chain.rpc_url, market.deployment, account)
    staking = chain.contract("Staking")
    if staking.functions.stakeOf(account.address).call() < 2 * ETH:
        chain.send(staking.functions.stake(), value=2 * ETH)
    backend = VerifierBackend(market.backend_url, account)
    return chain, backend, JobReexecutor(backend, ReexecLimits(2 << 30, 60.0), tmp_path / f"verifier-{index}")


def auditor(market: Market, tmp_path: Path) -> JobAuditor:
    chain, backend, reexec = staked_verifier(market, AUDITOR, tmp_path)
    return JobAuditor(chain, backend, reexec)


def committee_member(market: Market, tmp_path: Path) -> CommitteeMember:
    return CommitteeMember(*staked_verifier(market, VOTER, tmp_path))


def job_challenges(market: Market, job_id: int) -> list:
    manager = market.session.contract("ChallengeManager")
    since = market.deployment.contract("ChallengeManager").block
    return manager.events.JobChallenged().get_logs(from_block=since, argument_filters={"jobId": job_id})


def provider_answers(market: Market, settings) -> None:  # type: ignore[no-untyped-def]
    """The provider answers its open challenges on-chain, as `provider run` does in its loop."""
    market.session.mine(2)  # the challenge's randomness is the next block's hash
    assert Agent.build(settings).answer_open_challenges()


def end_vote(market: Market, member: CommitteeMember, dispute_id: int) -> None:
    committee = market.session.contract("DisputeCommittee")
    market.session.advance(committee.functions.voteWindow().call() + 1)
    member.tick()
    assert committee.functions.dispute(dispute_id).call().resolved, "the dispute was not resolved"


@dataclass(frozen=True)
class HonestJob:
    job_id: int
    provider: str
    provider_settings: object


@pytest.fixture(scope="module")
def honest_job(market: Market, tmp_path_factory: pytest.TempPathFactory) -> HonestJob:
    """A job run by the honest provider's worker, committed and uploaded, its window open."""
    tmp_path = tmp_path_factory.mktemp("honest")
    api = httpx.Client(base_url=market.backend_url, timeout=10)
    with pytest.MonkeyPatch.context() as monkeypatch:
        job, _ = renter_cli(market, tmp_path, monkeypatch)
        with running_provider(market, tmp_path) as provider:
            job_id = submit(market, tmp_path, job, provider.address)
            wait_until(lambda: committed_and_uploaded(market, api, job_id), 45, f"job {job_id} committed and uploaded")
    return HonestJob(job_id, provider.address, provider.settings)


def test_honest_job_passes_its_audit_once_without_a_challenge(
        market: Market, honest_job: HonestJob, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="verifier")
    audit = auditor(market, tmp_path)
    events: list[str] = []
    audit.record = events.append
    audit.tick()
    assert events == ["passed"]
    assert honest_job.job_id in audit.done
    assert job_challenges(market, honest_job.job_id) == []
    said = f"job {honest_job.job_id}: audited items {list(range(len(ITEMS)))} of {len(ITEMS)}: every item matches"
    assert caplog.text.count(said) == 1
    audit.tick()  # once per job
    assert caplog.text.count(said) == 1


def test_backend_serves_private_inputs_and_outputs_to_staked_verifiers_only(
        market: Market, honest_job: HonestJob, tmp_path: Path) -> None:
    spec_hash = read_job_view(market.session.contract("JobEscrow"), honest_job.job_id).specHash
    stranger = VerifierBackend(market.backend_url, dev_account(UNSTAKED))
    spec = JobSpec.parse(stranger.content(spec_hash))  # specs are public
    first_input = bytes.fromhex(spec.inputs[0][2:])
    with pytest.raises(BackendUnavailable, match="404"):  # someone else's input: as if missing
        stranger.content(first_input)
    with pytest.raises(BackendRefused, match="403"):
        stranger.output(honest_job.job_id, 0)
    names = {i: bytes.fromhex(name[2:]) for i, name in enumerate(spec.inputs)}
    with pytest.raises(BackendRefused, match="403"):
        stranger.outputs(honest_job.job_id, [0, 1])
    with pytest.raises(BackendRefused, match="403"):
        stranger.inputs(honest_job.job_id, names)
    _, verifier, _ = staked_verifier(market, AUDITOR, tmp_path)
    assert keccak256(verifier.content(first_input)) == first_input
    assert verifier.output(honest_job.job_id, 0).startswith(b'{"dtype":"float32"')
    # Several at once, in one request each: the same bytes as one by one.
    inputs = verifier.inputs(honest_job.job_id, names)
    assert inputs == {i: verifier.content(name) for i, name in names.items()}
    outputs = verifier.outputs(honest_job.job_id, list(range(len(ITEMS))))
    assert outputs == {i: verifier.output(honest_job.job_id, i) for i in range(len(ITEMS))}


def test_audit_with_the_backend_down_is_retried_then_given_up_without_a_bond(
        market: Market, honest_job: HonestJob, tmp_path: Path) -> None:
    chain, _, _ = staked_verifier(market, AUDITOR, tmp_path)
    down = VerifierBackend(f"http://127.0.0.1:{free_port()}", dev_account(AUDITOR))
    audit = JobAuditor(chain, down, JobReexecutor(down, ReexecLimits(), tmp_path), max_attempts=3, backoff_s=0.01)
    balance = market.session.balance(chain.address)
    for _ in range(3):
        time.sleep(0.05)
        audit.tick()
    assert honest_job.job_id in audit.done  # given up after three transient failures
    assert job_challenges(market, honest_job.job_id) == []
    assert market.session.balance(chain.address) == balance  # no transaction, no bond


def test_false_claim_against_an_honest_job_loses_the_committee_vote(
        market: Market, honest_job: HonestJob, tmp_path: Path) -> None:
    s = market.session
    manager, staking = s.contract("ChallengeManager"), s.contract("Staking")
    # Another staked verifier claims a mismatch that is not there and escalates the answer.
    liar = s.accounts[LIAR]
    s.send(staking.functions.stake(), liar, value=2 * ETH)
    s.send(manager.functions.challengeJob(read_job(s.contract("JobEscrow"), honest_job.job_id).as_tuple(), 4), liar, value=manager.functions.minBond().call())
    challenge_id = manager.functions.challengeCount().call()
    provider_answers(market, honest_job.provider_settings)
    s.send(manager.functions.escalate(challenge_id), liar)

    member = committee_member(market, tmp_path)
    provider_stake, liar_stake = (staking.functions.stakeOf(a).call() for a in (honest_job.provider, liar))
    member.tick()
    dispute_id = manager.functions.challenge(challenge_id).call().disputeId
    committee = s.contract("DisputeCommittee")
    assert committee.functions.hasVoted(dispute_id, member.chain.address).call()
    assert committee.functions.dispute(dispute_id).call().weightChallengerWrong > 0
    end_vote(market, member, dispute_id)
    assert manager.functions.challenge(challenge_id).call().status == ChallengeStatus.CHALLENGER_FAULTED
    assert staking.functions.stakeOf(liar).call() == liar_stake - manager.functions.falseClaimSlash().call()
    assert staking.functions.stakeOf(honest_job.provider).call() == provider_stake


def test_provider_with_garbage_items_is_challenged_escalated_voted_at_fault_and_slashed(
        market: Market, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="verifier")
    job, renter = renter_cli(market, tmp_path, monkeypatch)
    s = market.session
    escrow, manager, staking = s.contract("JobEscrow"), s.contract("ChallengeManager"), s.contract("Staking")
    api = httpx.Client(base_url=market.backend_url, timeout=10)
    with running_provider(market, tmp_path, cheat="job-every=5") as provider:
        job_id = submit(market, tmp_path, job, provider.address)
        wait_until(lambda: committed_and_uploaded(market, api, job_id), 45, f"job {job_id} committed and uploaded")

        audit = auditor(market, tmp_path)
        audit.tick()
        [challenged] = job_challenges(market, job_id)
        assert challenged.args.challenger == audit.chain.address
        assert challenged.args.bond == manager.functions.minBond().call()
        assert "item 0: expected 0x" in caplog.text and "item 5: expected 0x" in caplog.text
        challenge_id = challenged.args.challengeId

        provider_answers(market, provider.settings)
    restarted = auditor(market, tmp_path)  # a fresh process: it finds its open challenge on-chain
    events: list[str] = []
    restarted.record = events.append
    restarted.tick()  # judges the revealed items and escalates
    assert events == ["escalated"]
    assert manager.functions.challenge(challenge_id).call().status == ChallengeStatus.ESCALATED

    member = committee_member(market, tmp_path)
    provider_stake = staking.functions.stakeOf(provider.address).call()
    renter_owed = escrow.functions.owedTo("0x" + "00" * 20, renter).call()
    member.tick()
    dispute_id = manager.functions.challenge(challenge_id).call().disputeId
    assert s.contract("DisputeCommittee").functions.dispute(dispute_id).call().weightProviderAtFault > 0
    end_vote(market, member, dispute_id)
    assert manager.functions.challenge(challenge_id).call().status == ChallengeStatus.PROVIDER_FAULTED
    assert staking.functions.stakeOf(provider.address).call() == \
        provider_stake - manager.functions.slashAmount().call()
    funded = read_job_view(escrow, job_id)
    assert funded.status == JobStatus.REFUNDED
    assert escrow.functions.owedTo("0x" + "00" * 20, renter).call() == renter_owed + funded.price
    # Every decision reached the backend with its evidence: indices, digests, transactions.
    reports = {r["decision"]: r for r in api.get("/disputes/reports", params={"subject": job_id, "kind": "job"}).json()}
    assert {"challenged", "escalated", "voted_fault"} <= set(reports)
    first = reports["challenged"]
    assert first["verifier"] == audit.chain.address.lower() and first["challenge_id"] == challenge_id
    assert {0, 5} <= set(first["indices"]) and all(d and d.startswith("0x") for d in first["expected_digests"])
    assert first["tx_hashes"] == ["0x" + challenged.transactionHash.hex().removeprefix("0x")]


def test_provider_silent_after_committing_garbage_is_slashed_at_the_response_deadline(
        market: Market, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job, renter = renter_cli(market, tmp_path, monkeypatch)
    s = market.session
    escrow, manager, staking = s.contract("JobEscrow"), s.contract("ChallengeManager"), s.contract("Staking")
    api = httpx.Client(base_url=market.backend_url, timeout=10)
    with running_provider(market, tmp_path, cheat="job-every=5") as provider:
        job_id = submit(market, tmp_path, job, provider.address)
        wait_until(lambda: committed_and_uploaded(market, api, job_id), 45, f"job {job_id} committed and uploaded")
    audit = auditor(market, tmp_path)
    audit.tick()
    [challenged] = job_challenges(market, job_id)
    challenge_id = challenged.args.challengeId
    provider_stake = staking.functions.stakeOf(provider.address).call()
    renter_owed = escrow.functions.owedTo("0x" + "00" * 20, renter).call()
    audit.tick()  # inside the response window: it waits
    assert manager.functions.challenge(challenge_id).call().status == ChallengeStatus.OPEN
    s.advance(manager.functions.responseWindow().call() + 1)  # the provider never answers
    s.mine()  # a live chain's blocks keep coming: the challenge's randomness becomes readable
    events: list[str] = []
    audit.record = events.append
    audit.tick()
    assert events == ["timeout-claimed"]
    assert manager.functions.challenge(challenge_id).call().status == ChallengeStatus.PROVIDER_FAULTED
    assert staking.functions.stakeOf(provider.address).call() < provider_stake
    assert read_job_view(escrow, job_id).status == JobStatus.REFUNDED
    refunded = read_job_view(escrow, job_id).price
    assert escrow.functions.owedTo("0x" + "00" * 20, renter).call() == renter_owed + refunded
    audit.tick()  # one fault, one slash: nothing more happens
    assert events == ["timeout-claimed"]

    # The service pulls the returned bond and the slash reward, and counts the job events.
    service = VerifierService(audit.chain, Settings(metrics_port=None), link_for=lambda provider: None,
                              auditor=audit)
    owed = manager.functions.owedTo(audit.chain.address).call()
    assert owed >= manager.functions.minBond().call()
    assert service.withdraw_rewards() == owed
    assert manager.functions.owedTo(audit.chain.address).call() == 0
    audit.record("passed")
    assert service.metrics.registry.get_sample_value("unchained_verifier_job_events_total", {"event": "passed"}) == 1


def test_fetch_all_keeps_order_runs_at_once_and_raises_the_first_failure() -> None:
    import threading

    from verifier.backend_client import fetch_all

    together = threading.Barrier(4, timeout=10)  # passes only if four fetches are in flight at once

    def fetch(key: int) -> bytes:
        together.wait()
        return bytes([key])

    assert fetch_all(fetch, [3, 1, 2, 0]) == [b"\x03", b"\x01", b"\x02", b"\x00"]

    def failing(key: int) -> bytes:
        if key == 2:
            raise OSError("backend away")
        return b""

    with pytest.raises(OSError, match="backend away"):
        fetch_all(failing, [1, 2, 3])
    assert fetch_all(failing, []) == [] and fetch_all(failing, [5]) == [b""]
