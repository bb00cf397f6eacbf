"""Jobs end to end on anvil: register, run a tiny real model (TorchScript and ONNX) in a limited
child process from the dispatched job, sign the result, commit the root in a batch, answer a
challenge, get paid; nothing is released for a job the chain does not show funded for us; a batch
with a bad job commits the rest; a restart commits what was signed; and every way a job can fail
ends as a clear error, a refunded renter and a live agent."""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager

import numpy as np
import pytest

from client import escrow_jobs
from client.escrow_jobs import read_job, read_job_view, read_job_views
from client.log_follower import EventLayout
from protocol.enums import ChallengeStatus, JobStatus
from protocol.jobs import decode_output, encode_output, output_digest
from protocol.merkle import MerkleTree
from provider_agent.agent import Agent
from provider_agent.jobs import DispatchMismatch, NotOurJob, UnknownJob
from client import WrongPassword
from tests.support.models import put, save_onnx, save_torchscript
from tests.support.provider_market import ETH
from tests.support.waiting import wait_until
from tests.tiny_models import Hangs, Hogs, Raises, Tiny

ITEMS = [np.random.default_rng(i).standard_normal(8).astype(np.float32) for i in range(10)]


@pytest.fixture
def agent(settings_for) -> Agent:
    agent = Agent.build(settings_for())
    agent.register()
    return agent


def test_register_stakes_and_registers_once(settings_for, market):
    agent = Agent.build(settings_for())
    registry = market.session.contract("ProviderRegistry")
    assert not registry.functions.isRegistered(market.provider).call()
    assert agent.register() is True
    assert registry.functions.isActive(market.provider).call()
    assert agent.chain.stake_of() == 2 * ETH
    assert agent.register() is False  # idempotent on every start
    assert agent.chain.provider_info()["gpu_count"] == len(agent.devices)


def test_wrong_keystore_password_is_refused(settings_for, keystore, tmp_path):
    wrong = tmp_path / "wrong-password"
    wrong.write_text("wrong\n")
    with pytest.raises(WrongPassword, match=f"^wrong password for keystore {keystore}$"):
        Agent.build(settings_for(password_file=wrong))


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_job_runs_commits_root_answers_challenge_and_gets_paid(agent, market, fmt):
    content = agent.settings.content_dir
    model = save_torchscript(Tiny(), content) if fmt == "torchscript" else save_onnx(Tiny(), content)
    job_id, spec = market.create_job(content, model, ITEMS, fmt=fmt)

    outcome = agent.jobs.process(market.dispatched(job_id))
    assert outcome.status == "signed", outcome
    # Signed by the provider under JobEscrow's domain, before anything went on-chain.
    signed = agent.jobs.signed_result(job_id)
    assert signed.signer(agent.chain.escrow_domain()) == market.provider
    assert agent.chain.job(job_id).status == JobStatus.FUNDED  # no acceptJob: commit accepts
    assert agent.committer.commit_signed() == [job_id]
    job = agent.chain.job(job_id)
    assert job.status == JobStatus.COMMITTED and job.item_count == len(ITEMS)

    # The committed root is the tree over what the model really computes, item by item.
    import torch
    expected = torch.tanh(Tiny().fc(torch.from_numpy(np.stack(ITEMS)))).detach().numpy()
    kept = [decode_output(agent.jobs.outputs.output(job_id, i)) for i in range(len(ITEMS))]
    np.testing.assert_allclose(np.stack(kept), expected, rtol=1e-5, atol=1e-6)
    assert job.output_root == MerkleTree.from_leaves(
        [output_digest(encode_output(k)) for k in kept]).root
    assert "0x" + job.output_root.hex() == signed.result.output_root

    # A second delivery of the same job does nothing (one commit on-chain).
    assert agent.jobs.process(market.dispatched(job_id)).status == "already-committed"
    assert agent.committer.finalize_due() == []  # the challenge window is open

    s, challenges, escrow = market.session, market.session.contract("ChallengeManager"), market.session.contract("JobEscrow")
    s.send(s.contract("Staking").functions.stake(), market.verifier, value=2 * ETH)
    s.send(challenges.functions.challengeJob(read_job(s.contract("JobEscrow"), job_id).as_tuple(), 3), market.verifier, value=ETH // 10)
    challenge_id = challenges.functions.challengeCount().call()
    s.mine(2)
    agent.jobs.answer_challenge(challenge_id)
    assert challenges.functions.challenge(challenge_id).call().status == ChallengeStatus.ANSWERED
    s.advance(escrow.functions.challengeWindow().call() + 1)
    assert agent.committer.finalize_due() == []  # the answered challenge still holds the escrow
    s.advance(challenges.functions.escalationWindow().call() + 1)
    s.send(challenges.functions.settle(challenge_id), market.verifier)
    # The agent collects its own pay once the window is over and nothing holds the job: once, in
    # the finalizing transaction (finalizeJobsAndWithdraw), with whatever else the escrow owed it.
    owed_before, before = agent.chain.owed()["JobEscrow"], s.balance(market.provider)
    assert agent.committer.finalize_due() == [job_id]
    assert agent.chain.job(job_id).status == JobStatus.FINALIZED
    assert agent.committer.finalize_due() == []
    assert agent.jobs.store.get(job_id).status == "finalized"
    [paid] = escrow.events.JobFinalized().get_logs(from_block=0, argument_filters={"jobId": job_id})
    receipt = s.web3.eth.get_transaction_receipt(paid.transactionHash)
    gas = receipt.gasUsed * receipt.effectiveGasPrice
    assert s.balance(market.provider) == before + owed_before + paid.args.providerAmount - gas
    owed = agent.chain.owed()
    assert owed["JobEscrow"] == 0 and owed["ChallengeManager"] > 0  # the challenge's reward is still owed
    before = s.balance(market.provider)
    agent.chain.withdraw_all()
    assert s.balance(market.provider) > before


def _refunded_at_once(agent, market, job_id, reason_words):
    """The provider failed the job on-chain when it found it could not run it: the renter is
    refunded in full in that same transaction, long before the deadline, and the reason is in
    the JobFailed event for anyone to read."""
    s = market.session
    escrow = s.contract("JobEscrow")
    job = agent.chain.job(job_id)
    assert job.status == JobStatus.REFUNDED and s.now() < job.deadline
    assert agent.jobs.store.get(job_id).status == "refunded"
    owed = escrow.functions.owedTo("0x" + "00" * 20, market.renter).call()
    assert owed >= ETH // 20  # (more if an earlier test stopped before withdrawing)
    [failed] = escrow.events.JobFailed().get_logs(from_block=0, argument_filters={"jobId": job_id})
    assert failed.args.refund == ETH // 20 and failed.args.provider == market.provider
    assert reason_words in failed.args.reason and len(failed.args.reason.encode()) <= 256
    renter_before = s.balance(market.renter)
    s.send(escrow.functions.withdraw("0x" + "00" * 20), market.renter)
    assert s.balance(market.renter) > renter_before
    assert agent.jobs.refund_failed() == []  # nothing left to refund, nothing sent twice


@pytest.mark.parametrize("case,kind,words", [
    ("raises", "model-error", "division by zero"),
    ("hangs", "timeout", "budget"),
    ("hogs", "out-of-memory", "limit"),
])
def test_bad_model_fails_job_refunds_renter_and_agent_survives(agent, market, case, kind, words):
    content = agent.settings.content_dir
    default_limits = agent.jobs.limits
    # A budget the hanging model overruns, but that a loaded machine's cold child (importing
    # torch takes seconds on a busy box) does not.
    agent.jobs.limits = type(agent.jobs.limits)(memory_bytes=3 << 30, timeout_s=10.0 if case == "hangs" else 30.0)
    module = {"raises": Raises(), "hangs": Hangs(), "hogs": Hogs()}[case]
    job_id, _ = market.create_job(content, save_torchscript(module, content), ITEMS[:2])
    outcome = agent.jobs.process(market.dispatched(job_id))
    assert outcome.status == "refunded" and outcome.error.startswith(kind) and words in outcome.error, outcome
    _refunded_at_once(agent, market, job_id, kind)
    # The agent is alive and still runs a good job afterwards.
    agent.jobs.limits = default_limits
    good, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS[:3])
    assert agent.jobs.process(market.dispatched(good)).status == "signed"
    assert agent.committer.commit_signed() == [good]


def test_a_text_file_as_model_is_failed_on_chain_at_once(agent, market):
    content = agent.settings.content_dir
    model = put(content, b"this is a text file, not a TorchScript archive\n")
    job_id, _ = market.create_job(content, model, ITEMS[:2])
    outcome = agent.jobs.process(market.dispatched(job_id))
    assert outcome.status == "refunded" and outcome.error.startswith("model-error"), outcome
    _refunded_at_once(agent, market, job_id, "model-error")


def test_malformed_spec_is_not_accepted_and_is_refunded(agent, market):
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS[:2],
                                  spec_bytes=b'{"version": 1, "model": "not a hash"}')
    outcome = agent.jobs.process(market.dispatched(job_id))
    assert outcome.status == "refunded" and "malformed spec" in outcome.error
    _refunded_at_once(agent, market, job_id, "malformed spec")


def test_missing_input_is_not_accepted_and_is_refunded(agent, market):
    content = agent.settings.content_dir
    job_id, spec = market.create_job(content, save_torchscript(Tiny(), content), ITEMS[:2])
    (content / spec.inputs[1]).unlink()
    outcome = agent.jobs.process(market.dispatched(job_id))
    assert outcome.status == "refunded" and spec.inputs[1] in outcome.error and "not found" in outcome.error
    _refunded_at_once(agent, market, job_id, "bad-input")


def test_unknown_model_is_failed_on_chain_before_accepting(agent, market):
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, "0x" + "ab" * 32, ITEMS[:2])
    outcome = agent.jobs.process(market.dispatched(job_id))
    assert outcome.status == "refunded" and "not found" in outcome.error, outcome
    _refunded_at_once(agent, market, job_id, "0x" + "ab" * 32)


def test_a_job_found_past_its_deadline_is_refunded_with_refund_expired(agent, market):
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS[:2], deadline_in=120)
    market.session.advance(121)
    outcome = agent.jobs.process(market.dispatched(job_id))
    assert outcome.status == "refunded" and "deadline" in outcome.error
    escrow = market.session.contract("JobEscrow")
    assert escrow.events.JobExpired().get_logs(from_block=0, argument_filters={"jobId": job_id})
    assert not escrow.events.JobFailed().get_logs(from_block=0, argument_filters={"jobId": job_id})
    market.session.send(escrow.functions.withdraw("0x" + "00" * 20), market.renter)


def test_tampered_content_is_rejected_by_hash(agent, market):
    content = agent.settings.content_dir
    job_id, spec = market.create_job(content, save_torchscript(Tiny(), content), ITEMS[:2])
    (content / spec.inputs[0]).write_bytes(encode_output(np.zeros(8, np.float32)))
    outcome = agent.jobs.process(market.dispatched(job_id))
    assert outcome.status == "refunded" and "hashes to" in outcome.error
    _refunded_at_once(agent, market, job_id, "hashes to")


def test_nothing_is_released_for_a_dispatched_job_the_chain_does_not_show_funded_for_us(agent, market):
    """The operator is trusted for availability only: a made-up job (never funded), or a real one
    dispatched with other terms, is worked on beside the chain check but nothing is released."""
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS[:2])
    real = market.dispatched(job_id)
    made_up = dataclasses.replace(real, id=job_id + 1000)
    with pytest.raises(UnknownJob):
        agent.jobs.process(made_up)
    cheaper = dataclasses.replace(real, price=real.price // 2)  # not what the renter paid
    with pytest.raises(DispatchMismatch, match="differ"):
        agent.jobs.process(cheaper)
    for job in (made_up, cheaper):
        record = agent.jobs.store.get(job.id)
        assert record.status == "rejected" and record.signature is None
        assert agent.jobs.signed_result(job.id) is None
        assert agent.jobs.outputs.digests(job.id) is None  # outputs computed, then deleted
    assert agent.committer.commit_signed() == []
    assert agent.chain.job(job_id).status == JobStatus.FUNDED
    # A payload that names another provider is refused before any work.
    with pytest.raises(NotOurJob):
        agent.jobs.process(dataclasses.replace(real, provider=market.renter.lower()))
    # The job as really funded still runs (after the rejection of its forged twin).
    assert agent.jobs.process(real).status == "signed"
    assert agent.committer.commit_signed() == [job_id]


def test_a_job_dispatched_as_funded_is_checked_by_its_slot_alone(agent, market, monkeypatch):
    """The check beside the work reads the escrow's slot (the dispatched Job hashes to it) and
    the chain's time: no event query, whose cost grows with the chain on many nodes."""
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS[:2])

    def no_event_query(job_id):  # type: ignore[no-untyped-def]
        raise AssertionError(f"job {job_id} rebuilt from its events")

    monkeypatch.setattr(agent.chain, "job", no_event_query)
    assert agent.jobs.process(market.dispatched(job_id)).status == "signed"
    monkeypatch.undo()
    assert agent.committer.commit_signed() == [job_id]


def test_a_batch_with_one_bad_job_commits_the_rest_and_refunds_the_bad_one(agent, market):
    content = agent.settings.content_dir
    model = save_torchscript(Tiny(), content)
    good = [market.create_job(content, model, ITEMS[:2])[0] for _ in range(3)]
    late, _ = market.create_job(content, model, ITEMS[:2], deadline_in=600)
    for job_id in [*good, late]:
        assert agent.jobs.process(market.dispatched(job_id)).status == "signed"
    market.session.advance(601)  # the late job's deadline passes before the commit goes out
    escrow = market.session.contract("JobEscrow")
    first = market.session.web3.eth.block_number
    assert sorted(agent.committer.commit_signed()) == good
    assert all(agent.chain.job(j).status == JobStatus.COMMITTED for j in good)
    record = agent.jobs.store.get(late)
    assert record.status == "failed" and "commit-refused" in record.error
    # Nothing committed twice: one ResultCommitted per good job, the good ones in few transactions.
    logs = escrow.events.ResultCommitted().get_logs(from_block=first)
    assert sorted(e.args.jobId for e in logs) == good
    assert len({e.transactionHash for e in logs}) < len(good)
    assert agent.committer.commit_signed() == []
    assert agent.jobs.refund_failed() == [late]
    assert agent.chain.job(late).status == JobStatus.REFUNDED
    market.session.send(escrow.functions.withdraw("0x" + "00" * 20), market.renter)
    # Finalized together once their windows are over.
    market.session.advance(escrow.functions.challengeWindow().call() + 1)
    assert sorted(agent.committer.finalize_due()) == good
    assert all(agent.chain.job(j).status == JobStatus.FINALIZED for j in good)


def test_finalizing_reads_the_slots_of_the_jobs_as_committed_not_their_events(agent, market, monkeypatch):
    """Once their windows are over, the jobs the agent committed are checked by their slots in one
    round trip; only a job whose slot holds another hash than the one recorded here (a record the
    chain contradicts) is rebuilt from its events, and it is still finalized as the chain has it."""
    content = agent.settings.content_dir
    model = save_torchscript(Tiny(), content)
    jobs = [market.create_job(content, model, ITEMS[:2])[0] for _ in range(3)]
    for job_id in jobs:
        assert agent.jobs.process(market.dispatched(job_id)).status == "signed"
    assert sorted(agent.committer.commit_signed()) == jobs
    contradicted = jobs[0]
    agent.jobs.store.update(contradicted, "committed", root=b"\x01" * 32)
    escrow = market.session.contract("JobEscrow")
    market.session.advance(escrow.functions.challengeWindow().call() + 1)

    rebuilt, from_events = [], agent.chain.job
    monkeypatch.setattr(agent.chain, "job", lambda job_id: rebuilt.append(job_id) or from_events(job_id))
    assert sorted(agent.committer.finalize_due()) == jobs
    assert rebuilt == [contradicted]
    assert all(from_events(j).status == JobStatus.FINALIZED for j in jobs)
    assert all(agent.jobs.store.get(j).status == "finalized" for j in jobs)


def test_a_job_is_read_from_the_escrows_deployment_block_not_from_genesis(agent, market, monkeypatch):
    """Many nodes refuse log queries over long ranges: the events of a job are looked for from
    the block the escrow was deployed in."""
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS[:2])
    deployed = agent.chain.deployment.contract("JobEscrow").block
    assert deployed > 0
    queries, get_logs = [], escrow_jobs.get_logs
    monkeypatch.setattr(escrow_jobs, "get_logs", lambda web3, query: queries.append(query) or get_logs(web3, query))
    assert agent.chain.job(job_id).status == JobStatus.FUNDED
    assert queries and all(int(q["fromBlock"], 16) == deployed for q in queries)


def test_a_restart_commits_what_was_signed_before_it(agent, market, settings_for):
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS[:3])
    assert agent.jobs.process(market.dispatched(job_id)).status == "signed"
    # The agent stops here (its committer never ran); a new one over the same data directory
    # finds the signed job in its record and commits it from its own thread.
    restarted = Agent.build(settings_for())
    assert restarted.settings.state_db == agent.settings.state_db
    restarted.committer.start()
    try:
        wait_until(lambda: agent.chain.job(job_id).status == JobStatus.COMMITTED, 30, "the signed job committed")
    finally:
        restarted.committer.stop()
    assert restarted.jobs.store.get(job_id).status == "committed"
    assert "0x" + agent.chain.job(job_id).output_root.hex() == restarted.jobs.signed_result(job_id).result.output_root
    # A redelivery of the dispatch after the restart does nothing more.
    assert restarted.jobs.process(market.dispatched(job_id)).status == "already-committed"


def _signed_job_raced_by_its_commit(agent, market, monkeypatch):  # type: ignore[no-untyped-def]
    """A job the agent has signed but not committed, the escrow, and a context in which a reader
    races the provider's committer: the job's commit is mined right after the reader queries
    ResultCommitted."""
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS[:2])
    assert agent.jobs.process(market.dispatched(job_id)).status == "signed"
    escrow = agent.chain.contract("JobEscrow")
    committed_topic = EventLayout(next(i for i in escrow.abi if i.get("name") == "ResultCommitted")).topic
    get_logs = escrow_jobs.get_logs

    def commits_then_the_commit_is_mined(web3, query):  # type: ignore[no-untyped-def]
        logs = get_logs(web3, query)
        if query["topics"][0] == committed_topic:
            assert agent.committer.commit_signed() == [job_id]
        return logs

    @contextmanager
    def racing():  # type: ignore[no-untyped-def]
        with monkeypatch.context() as patch:
            patch.setattr(escrow_jobs, "get_logs", commits_then_the_commit_is_mined)
            yield

    return job_id, escrow, racing


def test_a_job_read_while_its_commit_is_mined_is_found(agent, market, monkeypatch):
    """A reader (the agent's heartbeat, a renter, the verifier) racing the provider's committer:
    the commit is mined right after the reader's event queries. The slot is read before them, so
    the events fetched always include the ones its hash covers."""
    job_id, escrow, racing = _signed_job_raced_by_its_commit(agent, market, monkeypatch)
    with racing():
        job = read_job(escrow, job_id)
    assert job.id == job_id and not job.is_committed  # the job as the slot stood when it was read
    assert read_job(escrow, job_id).is_committed


def test_a_job_view_read_while_its_commit_is_mined_has_the_status_of_the_job_it_holds(agent, market, monkeypatch):
    """The view's status and window come from the very slot read that vouched for its job: a
    commit mined between the reads leaves a funded job with a funded status, not a committed one."""
    job_id, escrow, racing = _signed_job_raced_by_its_commit(agent, market, monkeypatch)
    with racing():
        view = read_job_view(escrow, job_id)
    assert not view.job.is_committed and view.status == JobStatus.FUNDED and view.challengeWindowEnd == 0
    assert read_job_view(escrow, job_id).status == JobStatus.COMMITTED


def test_several_jobs_are_read_in_a_few_round_trips_as_each_alone(agent, market, monkeypatch):
    """The verifier reads every newly committed job of a tick at once: the same views as one by
    one, in four round trips whatever their number (slots in one batch, one event query per
    kind, the challenge window)."""
    content = agent.settings.content_dir
    model = save_torchscript(Tiny(), content)
    jobs = [market.create_job(content, model, ITEMS[:2])[0] for _ in range(4)]
    for job_id in jobs[:3]:
        assert agent.jobs.process(market.dispatched(job_id)).status == "signed"
    assert sorted(agent.committer.commit_signed()) == jobs[:3]
    escrow = agent.chain.contract("JobEscrow")
    alone = {job_id: read_job_view(escrow, job_id) for job_id in jobs}
    from client.rpc_session import KeepAliveSession

    trips, post = [], KeepAliveSession.post  # every HTTP request to the node
    monkeypatch.setattr(KeepAliveSession, "post", lambda self, *args, **kw: trips.append(1) or post(self, *args, **kw))
    together = read_job_views(escrow, jobs)
    assert together == alone and len(trips) == 4
    assert together[jobs[0]].job.is_committed and not together[jobs[3]].job.is_committed


def test_failure_reason_fits_the_escrow_and_keeps_the_error_of_a_traceback():
    from provider_agent.jobs import failure_reason

    traceback = ("model-error: Error: The following operation failed in the TorchScript interpreter.\n"
                 "Traceback of TorchScript (most recent call last):\n  File \"code/x.py\", line 10\n" + "  ~~~\n" * 50
                 + "builtins.RuntimeError: model bug: division by zero in layer 3\n")
    assert failure_reason(traceback) == "model-error: builtins.RuntimeError: model bug: division by zero in layer 3"
    assert failure_reason("bad-input: short") == "bad-input: short"
    long = failure_reason("bad-input: " + "é" * 300)
    assert len(long.encode()) <= 256 and long.startswith("bad-input: é")


def test_a_stopping_committer_commits_what_was_signed_first(agent, market):
    content = agent.settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS[:2])
    assert agent.jobs.process(market.dispatched(job_id)).status == "signed"
    assert agent.chain.job(job_id).status == JobStatus.FUNDED  # its round has not come
    agent.committer.stop()  # as a worker's warm shutdown does
    assert agent.chain.job(job_id).status == JobStatus.COMMITTED
    assert agent.jobs.store.get(job_id).status == "committed"
