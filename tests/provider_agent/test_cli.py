"""`provider run` as a real process (registers, mines, serves /metrics and /status, takes a job
from its Celery queue) and `provider status` reading it into a table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import numpy as np
from typer.testing import CliRunner

from protocol.tasks import TASK_RUN_JOB, provider_queue
from provider_agent.cli import provider_app
from tests.support.broker import signed_result, signed_sender
from tests.support.models import save_torchscript
from tests.support.processes import stop
from tests.support.waiting import wait_until
from unchained_cli.chain import REPO_ROOT as REPO
from tests.tiny_models import Tiny
from client.ports import free_port


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

        def serving() -> httpx.Response | None:
            assert proc.poll() is None, proc.stdout.read().decode()
            response = _get(status_url)
            return response if response is not None and response.status_code == 200 else None

        # It registers and stakes before it serves: on a loaded machine that takes a while.
        status = wait_until(serving, 180, "`provider run` serves /status").json()
        assert status["registered"] and status["active"] and status["address"] == market.provider

        content = settings.content_dir
        job_id, _ = market.create_job(content, save_torchscript(Tiny(), content),
                                      [np.ones(8, np.float32)] * 4)
        client = signed_sender(redis_url, market, 0)  # the dispatcher's key
        result = client.for_provider(market.provider).send_task(
            TASK_RUN_JOB, args=[market.dispatched(job_id).to_json()], queue=provider_queue(market.provider))
        assert signed_result(client, market.provider, result, 60)["status"] == "signed"
        mining = 'unchained_provider_mining_state{provider="%s",state="mining"} 1.0' % market.provider.lower()

        def resumed() -> str | None:  # the cooldown passed, mining resumed and its hash rate measured again
            response = _get(f"http://127.0.0.1:{port}/metrics")
            text = response.text if response is not None else ""
            rate = [line for line in text.splitlines() if line.startswith("unchained_provider_hashrate_hps{")]
            return text if mining in text and rate and float(rate[0].split()[-1]) > 0 else None

        metrics = wait_until(resumed, 60, "mining resumed after the job, with a hash rate")
        assert 'unchained_provider_jobs{provider="%s",status="committed"} 1.0' % market.provider.lower() in metrics

        shown = CliRunner().invoke(provider_app, ["status", "--url", status_url], terminal_width=120)
        assert shown.exit_code == 0, shown.output
        assert "hash rate" in shown.output and "jobs committed" in shown.output and "1 / 0 / 0" in shown.output
        shown = CliRunner().invoke(provider_app, ["status", "--url", status_url, "-o", "json"])
        doc = json.loads(shown.output)
        assert doc["address"] == market.provider and doc["jobs"]["committed"] == 1 and doc["stake_wei"].isdigit(), doc
    finally:
        stop(proc, 20)
