"""Jobs through a real Celery worker process on a private Redis: acknowledged late, idempotent.

The kill test SIGKILLs the worker while the model runs: the model's child dies with it, the
restarted worker resumes the job it finds orphaned in its local record (the unacknowledged
message would come back too, after Redis's visibility timeout, and find the job committed),
and the chain shows exactly one commit.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from celery import Celery

from protocol.tasks import TASK_RUN_JOB, provider_queue
from provider_agent.agent import Agent
from provider_agent.chain import JobStatus
from provider_agent.state import JobStore
from tests.provider_agent.conftest import REPO, save_torchscript
from tests.tiny_models import Slow, Tiny

ITEMS = [np.random.default_rng(i).standard_normal(8).astype(np.float32) for i in range(8)]


def wait_for(predicate, timeout: float, interval: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


class Worker:
    def __init__(self, settings, queue: str, log: Path | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        for name, value in settings.model_dump().items():
            if value is not None:
                env[f"UNCHAINED_PROVIDER_{name.upper()}"] = str(value)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "provider_agent.worker:app", "worker", "-Q", queue, "-P", "solo",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL,
            stderr=open(log, "ab") if log else subprocess.DEVNULL)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def setup(settings_for, market, redis_url):
    settings = settings_for(broker_url=redis_url, visibility_timeout_s=5)
    agent = Agent.build(settings)
    agent.register()
    client = Celery("test-client", broker=redis_url, backend=redis_url, set_as_current=False)
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
        first = client.send_task(TASK_RUN_JOB, args=[job_id], queue=queue)
        second = client.send_task(TASK_RUN_JOB, args=[job_id], queue=queue)
        assert first.get(timeout=60)["status"] == "committed"
        assert second.get(timeout=60)["status"] == "already-committed"
    finally:
        worker.stop()
    assert agent.chain.job(job_id).status == JobStatus.COMMITTED
    assert _commits(market, job_id) == 1


def test_worker_killed_mid_job_finishes_it_exactly_once(setup, market):
    settings, agent, client, queue = setup
    content = settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Slow(60_000), content), ITEMS)
    store = JobStore(settings.state_db)
    log = settings.data_dir.parent / "worker.log"
    worker = Worker(settings, queue, log)
    client.send_task(TASK_RUN_JOB, args=[job_id], queue=queue)
    request = settings.data_dir / "work" / str(job_id) / "request.json"
    try:
        assert wait_for(lambda: request.exists(), 60), "the job never started"
        time.sleep(1.0)  # the model child is running
        record = store.get(job_id)
        assert record is not None and record.status == "running"
        worker.kill()
        assert agent.chain.job(job_id).status == JobStatus.ACCEPTED  # killed before the commit
        # The model child died with its worker (no orphan keeps computing).
        child = int(re.search(rf"job {job_id}: model child pid (\d+)", log.read_text()).group(1))
        assert wait_for(lambda: not Path(f"/proc/{child}").exists(), 5), f"model child {child} outlived its worker"
        worker = Worker(settings, queue, log)
        assert wait_for(lambda: agent.chain.job(job_id).status == JobStatus.COMMITTED, 60, 0.25), log.read_text()
    finally:
        worker.stop()
    assert _commits(market, job_id) == 1
    assert store.get(job_id).attempts == 2
