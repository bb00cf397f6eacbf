"""`provider run` as a real process (registers, mines, serves /metrics and /status, takes a job
from its Celery queue) and `provider status` reading it into a table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import numpy as np
from celery import Celery
from typer.testing import CliRunner

from protocol.tasks import TASK_RUN_JOB, provider_queue
from provider_agent.cli import provider_app
from tests.provider_agent.conftest import REPO, save_torchscript
from tests.tiny_models import Tiny
from unchained_cli.chain import free_port


def _get(url: str):
    try:
        return httpx.get(url, timeout=2)
    except httpx.HTTPError:
        return None


def test_provider_run_registers_mines_takes_a_job_and_reports_status(settings_for, market, redis_url, keystore,
                                                                     password_file):
    settings = settings_for()
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "UNCHAINED_PASSWORD_FILE": str(password_file),
           "UNCHAINED_PROVIDER_DEPLOYMENTS_DIR": str(market.deployments_dir),
           "UNCHAINED_PROVIDER_MINING_BATCH": "4096", "UNCHAINED_PROVIDER_STAKE_WEI": str(2 * 10**18)}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from provider_agent.cli import provider_app; provider_app()", "run",
         "--rpc", market.chain.rpc_url, "--keystore", str(keystore), "--broker", redis_url,
         "--content-dir", str(settings.content_dir), "--data-dir", str(settings.data_dir),
         "--metrics-port", str(port)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        status_url = f"http://127.0.0.1:{port}/status"
        end = time.monotonic() + 60
        while (_get(status_url) is None or _get(status_url).status_code != 200) and time.monotonic() < end:
            assert proc.poll() is None, proc.stdout.read().decode()
            time.sleep(0.2)
        status = _get(status_url).json()
        assert status["registered"] and status["active"] and status["address"] == market.provider

        content = settings.content_dir
        job_id, _ = market.create_job(content, save_torchscript(Tiny(), content),
                                      [np.ones(8, np.float32)] * 4)
        client = Celery("test-client", broker=redis_url, backend=redis_url, set_as_current=False)
        result = client.send_task(TASK_RUN_JOB, args=[job_id], queue=provider_queue(market.provider))
        assert result.get(timeout=60)["status"] == "committed"
        time.sleep(1.5)  # the cooldown passes; mining resumes

        metrics = _get(f"http://127.0.0.1:{port}/metrics").text
        assert 'unchained_provider_jobs{provider="%s",status="committed"} 1.0' % market.provider.lower() in metrics
        rate = float(next(line for line in metrics.splitlines()
                          if line.startswith("unchained_provider_hashrate_hps{")).split()[-1])
        assert rate > 0
        assert 'unchained_provider_mining_state{provider="%s",state="mining"} 1.0' % market.provider.lower() in metrics

        shown = CliRunner().invoke(provider_app, ["status", "--url", status_url], terminal_width=120)
        assert shown.exit_code == 0, shown.output
        assert "hash rate" in shown.output and "jobs committed" in shown.output and "1 / 0 / 0" in shown.output
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
