"""Jobs through a real Celery worker process on a private Redis: acknowledged late, idempotent.

The kill test SIGKILLs the worker while the model runs: the model's child dies with it, the
restarted worker resumes the job it finds orphaned in its local record (the unacknowledged
message would come back too, after Redis's visibility timeout, and find the job committed),
and the chain shows exactly one commit.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from protocol.enums import JobStatus
from protocol.tasks import CONTENT_HEADER, TASK_RUN_JOB, inline_content, provider_queue
from provider_agent.agent import Agent
from provider_agent.state import JobStore
from tests.support.broker import signed_sender
from tests.support.models import save_torchscript
from tests.support.waiting import wait_until
from tests.support.worker import Worker
from tests.tiny_models import Slow, Tiny

ITEMS = [np.random.default_rng(i).standard_normal(8).astype(np.float32) for i in range(8)]


@pytest.fixture
def setup(settings_for, market, redis_url):
    settings = settings_for(broker_url=redis_url, visibility_timeout_s=5)
    agent = Agent.build(settings)
    agent.register()
    client = signed_sender(redis_url, market, 0).for_provider(market.provider)  # as the dispatcher
    return settings, agent, client, provider_queue(market.provider)


def _commits(market, job_id: int) -> int:
    escrow = market.session.contract("JobEscrow")
    return len(escrow.events.ResultCommitted.get_logs(from_block=0, argument_filters={"jobId": job_id}))


def test_job_through_worker_twice_delivered_is_committed_once(setup, market):
    settings, agent, client, queue = setup
    content = settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS)
    worker = Worker(settings, queue)
    try:
        job = market.dispatched(job_id).to_json()
        first = client.send_task(TASK_RUN_JOB, args=[job], queue=queue)
        second = client.send_task(TASK_RUN_JOB, args=[job], queue=queue)
        assert first.get(timeout=60)["result"]["status"] == "signed"  # a signed reply (client.task_auth)
        # The second finds the job signed (commit queued) or already committed by the committer.
        assert second.get(timeout=60)["result"]["status"] in ("signed", "already-committed")
        wait_until(lambda: agent.chain.job(job_id).status == JobStatus.COMMITTED, 30, "the committer committed")
        # A payload that is not a job is dropped at once with the reason, not retried.
        bad = client.send_task(TASK_RUN_JOB, args=[{"jobId": job_id, "specHash": "nope"}], queue=queue)
        with pytest.raises(Exception, match="lacks 'renter'"):
            bad.get(timeout=30)
    finally:
        worker.stop()
    assert agent.chain.job(job_id).status == JobStatus.COMMITTED
    assert _commits(market, job_id) == 1


def test_a_job_whose_spec_and_inputs_come_with_the_dispatch_runs_without_fetching_them(setup, market, tmp_path):
    settings, agent, client, queue = setup
    renters = tmp_path / "backend-side"  # what the backend holds; the provider's source has only the model
    renters.mkdir()
    model = save_torchscript(Tiny(), settings.content_dir)
    (renters / model).write_bytes((settings.content_dir / model).read_bytes())
    job_id, spec = market.create_job(renters, model, ITEMS[:3])
    spec_hash = "0x" + market.dispatched(job_id).spec_hash.hex()
    sent = {name: (renters / name).read_bytes() for name in (spec_hash, *spec.inputs)}
    forged_id, forged_spec = market.create_job(renters, model, ITEMS[3:5])  # its content wrong inline
    forged_hash = "0x" + market.dispatched(forged_id).spec_hash.hex()
    forged = {name: b"not this" for name in (forged_hash, *forged_spec.inputs)}
    worker = Worker(settings, queue)
    try:
        done = client.send_task(TASK_RUN_JOB, args=[market.dispatched(job_id).to_json()], queue=queue,
                                headers={CONTENT_HEADER: inline_content(sent)})
        assert done.get(timeout=60)["result"]["status"] == "signed"
        # Content that does not hash to its name is not used: the job runs on what the provider's
        # own source gives (which the first job's source lacked, so it could run only on the dispatch's).
        for name in (forged_hash, *forged_spec.inputs):
            (settings.content_dir / name).write_bytes((renters / name).read_bytes())
        fetched = client.send_task(TASK_RUN_JOB, args=[market.dispatched(forged_id).to_json()], queue=queue,
                                   headers={CONTENT_HEADER: inline_content(forged)})
        assert fetched.get(timeout=60)["result"]["status"] == "signed"
        bad = client.send_task(TASK_RUN_JOB, args=[market.dispatched(job_id).to_json()], queue=queue,
                               headers={CONTENT_HEADER: {"0x12": "AA=="}})
        with pytest.raises(Exception, match="content hash -> base64"):
            bad.get(timeout=30)
    finally:
        worker.stop()
    record = agent.jobs.store.get(job_id)
    assert record is not None and record.status in ("signed", "committed")
    assert agent.jobs.outputs.digests(forged_id) is not None and len(agent.jobs.outputs.digests(forged_id)) == 2


def test_worker_killed_mid_job_finishes_it_exactly_once(setup, market):
    settings, agent, client, queue = setup
    content = settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Slow(60_000), content), ITEMS)
    store = JobStore(settings.state_db)
    log = settings.data_dir.parent / "worker.log"
    worker = Worker(settings, queue, log)
    client.send_task(TASK_RUN_JOB, args=[market.dispatched(job_id).to_json()], queue=queue)
    started = re.compile(rf"job {job_id}: model child of sandbox \d+ \(pid (\d+);")
    try:
        # The model child is running: killed now, the worker leaves the job half done.
        wait_until(lambda: log.exists() and started.search(log.read_text()), 60, "the worker started the model child")
        record = store.get(job_id)
        assert record is not None and record.status == "running"
        worker.kill()
        assert agent.chain.job(job_id).status == JobStatus.FUNDED  # killed before the commit
        # The sandbox (and the model child in its pid namespace) died with its worker: no orphan keeps computing.
        sandbox = int(started.search(log.read_text()).group(1))
        wait_until(lambda: not Path(f"/proc/{sandbox}").exists(), 5, f"sandbox {sandbox} died with its worker")
        worker = Worker(settings, queue, log)
        wait_until(lambda: agent.chain.job(job_id).status == JobStatus.COMMITTED, 60,
                   f"the restarted worker committed job {job_id}", 0.25)
    finally:
        worker.stop()
    assert _commits(market, job_id) == 1
    assert store.get(job_id).attempts == 2
