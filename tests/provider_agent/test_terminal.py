"""What `provider run` shows its operator, read from a real agent's terminal: the start, its
registration and jobs; heartbeats and the tasks it rightly refuses (here an expired one) stay
out of the way (debug level; one line for a refusal, no traceback); no Celery banner, no
Celery SecurityWarning (the worker takes only signed JSON tasks, which is not what it warns of)."""

from __future__ import annotations

import os
import time

import numpy as np

from client.broker import QueueApps
from client.ports import free_port
from client.task_auth import TaskAuth, domain_of
from protocol.tasks import TASK_RUN_JOB, provider_queue
from tests.support.accounts import dev_account
from tests.support.broker import signed_result, signed_sender
from tests.support.models import save_torchscript
from tests.support.processes import provider_terminal
from tests.support.waiting import wait_until
from tests.tiny_models import Tiny


def test_the_terminal_shows_start_registration_and_jobs_not_beats_banners_or_tracebacks(
        settings_for, market, redis_url, keystore, password_file, tmp_path):
    settings = settings_for()
    log = tmp_path / "terminal.txt"
    env = {"UNCHAINED_PASSWORD_FILE": str(password_file), "UNCHAINED_PROVIDER_DEPLOYMENTS_DIR": str(market.deployments_dir),
           "UNCHAINED_PROVIDER_HEARTBEAT_S": "0.5", "UNCHAINED_PROVIDER_MINING": "false",
           "UNCHAINED_PROVIDER_STAKE_WEI": str(2 * 10**18)}
    args = ["--rpc", market.chain.rpc_url, "--keystore", str(keystore), "--broker", redis_url,
            "--content-dir", str(settings.content_dir), "--data-dir", str(settings.data_dir),
            "--metrics-port", str(free_port())]
    with provider_terminal(args, env, log) as proc:
        def shown(text: str) -> str | None:
            assert proc.poll() is None, log.read_text()
            said = log.read_text()
            return said if text in said else None

        wait_until(lambda: shown("ready"), 180, "the agent's worker is ready")
        queue = provider_queue(market.provider)
        content = settings.content_dir
        job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), [np.ones(8, np.float32)] * 2)
        job = market.dispatched(job_id).to_json()
        # Signed by the dispatcher an hour ago: expired when it arrives.
        late = TaskAuth(domain_of(market.session.deployment), dev_account(0), clock=lambda: time.time() - 3600)
        QueueApps("late-sender", redis_url, lambda: late, results=False).for_provider(market.provider).send_task(
            TASK_RUN_JOB, args=[job], queue=queue)
        wait_until(lambda: shown("expired"), 60, "the expired task refused")
        client = signed_sender(redis_url, market, 0)
        result = client.for_provider(market.provider).send_task(TASK_RUN_JOB, args=[job], queue=queue)
        assert signed_result(client, market.provider, result, 60)["status"] == "signed"
        wait_until(lambda: shown(f"job {job_id}: signed"), 30, "the job's line")
    said = log.read_text()
    lines = said.splitlines()
    assert lines[0] == f"registered {market.provider} with 1 device(s)", said
    assert any(f"job {job_id}: signed" in line for line in lines), said  # the job's own lines stay
    refused = [line for line in lines if "expired" in line]
    assert len(refused) == 1 and "dropped: expired" in refused[0] and "INFO" in refused[0], said
    for noise in ("Traceback", "SecurityWarning", "superuser", "[config]", "[queues]", "[tasks]",
                  "received", "succeeded in", "HTTP Request"):
        assert noise not in said, (noise, said)
    if os.geteuid() == 0:  # said once, in our words
        assert sum("running as root" in line for line in lines) == 1, said
