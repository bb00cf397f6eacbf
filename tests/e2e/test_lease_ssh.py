"""A lease end to end: the renter pays, binds its SSH key with its wallet, the provider's worker
builds the machine and confirms delivery on-chain, the renter logs in with a real ssh client,
and stopping the lease closes the session and shuts the key out. A lease the provider never
delivers is refunded in full."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from client.keystore import PASSWORD_FILE_ENV
from tests.support.e2e_market import (ETH, PROVIDER, RENTER, keystore, market, password_file,  # noqa: F401
                                      running_provider)
from unchained_cli.main import app
from unchained_cli.market import wait_for

pytestmark = pytest.mark.skipif(not all(shutil.which(t) or Path(f"/usr/sbin/{t}").exists()
                                        for t in ("bwrap", "sshd", "ssh", "ssh-keygen", "nsenter")),
                                reason="needs bubblewrap, openssh-server and openssh-client (scripts/setup.sh)")


def _ssh(key: Path, port: int, user: str, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                           "-o", "LogLevel=ERROR", "-p", str(port), f"{user}@127.0.0.1", command],
                          capture_output=True, text=True, timeout=60)


def test_renter_leases_logs_in_over_ssh_and_stopping_shuts_it_out(market, tmp_path, monkeypatch):  # noqa: F811
    renter_keystore, _renter = keystore(tmp_path, RENTER)
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(password_file(tmp_path)))
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True)
    chain = ["--keystore", str(renter_keystore), "--rpc", market.chain.rpc_url,
             "--deployment", str(market.deployment_file)]
    runner = CliRunner()
    with running_provider(market, tmp_path, lease_public_host="127.0.0.1", lease_listen_host="127.0.0.1") as provider:
        started = runner.invoke(app, ["lease", "start", "--provider", provider.address, "--gpus", "1", "--hours", "1",
                                            "--ssh-key", str(tmp_path / "id.pub"), "--wait", "60",
                                            "--backend", market.backend_url, *chain], terminal_width=200)
        assert started.exit_code == 0, started.output + (tmp_path / "worker.log").read_text()[-3000:]
        lease_id = int(re.search(r"lease (\d+):", started.output).group(1))
        command = re.search(r"ssh -p (\d+) (\w+)@127\.0\.0\.1", started.output)
        port, user = int(command.group(1)), command.group(2)

        inside = _ssh(tmp_path / "id", port, user, "echo gpus=$CUDA_VISIBLE_DEVICES; hostname")
        assert inside.returncode == 0 and inside.stdout.split() == ["gpus=0", "lease"], inside.stderr
        logged_in = runner.invoke(app, ["lease", "ssh", str(lease_id), "-i", str(tmp_path / "id"), "--backend",
                                              market.backend_url, *chain, "--", "echo", "pinned"])
        assert logged_in.exit_code == 0

        status = runner.invoke(app, ["lease", "status", str(lease_id), "--backend", market.backend_url,
                                           "--rpc", market.chain.rpc_url, "--deployment", str(market.deployment_file)],
                               terminal_width=200)
        assert "active, delivered" in status.output and "time left" in status.output, status.output

        session = subprocess.Popen(["ssh", "-i", str(tmp_path / "id"), "-o", "BatchMode=yes", "-o",
                                    "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-p", str(port),
                                    f"{user}@127.0.0.1", "echo open; sleep 600"], stdout=subprocess.PIPE, text=True)
        assert session.stdout.readline().strip() == "open"
        stopped = runner.invoke(app, ["lease", "stop", str(lease_id), *chain], terminal_width=200)
        assert stopped.exit_code == 0, stopped.output
        session.wait(timeout=60)  # the worker tears the machine down once the backend saw LeaseEnded
        assert wait_for(lambda: _ssh(tmp_path / "id", port, user, "true").returncode == 255, 30)
        assert wait_for(lambda: not (provider.settings.leases_dir / f"lease-{lease_id}").exists(), 10)


def test_a_lease_the_provider_never_delivers_is_refunded_in_full(market, tmp_path, monkeypatch):  # noqa: F811
    """The provider is registered (by the test above) but no agent of it runs: no connection details
    come, and once the delivery window has passed, stopping refunds everything."""
    renter_keystore, _renter = keystore(tmp_path, RENTER)
    provider_keystore, provider = keystore(tmp_path, PROVIDER)
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(password_file(tmp_path)))
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True)
    chain = ["--keystore", str(renter_keystore), "--rpc", market.chain.rpc_url,
             "--deployment", str(market.deployment_file)]
    runner = CliRunner()
    started = runner.invoke(app, ["lease", "start", "--provider", provider, "--gpus", "1", "--hours", "1",
                                        "--ssh-key", str(tmp_path / "id.pub"), "--wait", "3",
                                        "--backend", market.backend_url, *chain], terminal_width=200)
    assert started.exit_code == 1 and "no connection details from the provider" in started.output, started.output
    lease_id = int(re.search(r"lease (\d+):", started.output).group(1))
    leases = market.session.contract("LeaseManager")
    market.session.web3.provider.make_request("evm_increaseTime", [leases.functions.DELIVERY_WINDOW().call() + 1])
    market.session.web3.provider.make_request("evm_mine", [])
    owed_before = leases.functions.owedTo(_renter).call()
    stopped = runner.invoke(app, ["lease", "stop", str(lease_id), *chain], terminal_width=200)
    assert stopped.exit_code == 0 and "provider earned 0 ETH" in stopped.output, stopped.output
    paid = leases.functions.getLease(lease_id).call().paid
    assert leases.functions.owedTo(_renter).call() - owed_before == paid
