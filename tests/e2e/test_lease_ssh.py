"""A lease end to end: the renter pays, binds its SSH key with its wallet, the provider's worker
builds the machine and confirms delivery on-chain, the renter logs in with a real ssh client,
and stopping the lease closes the session and shuts the key out. A lease the provider never
delivers is refunded in full."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from client.keystore import PASSWORD_FILE_ENV
from client.ports import free_port
from protocol.enums import LeaseStatus
from protocol.lease_access import LeaseAccess, LeaseDomain, sign, typed_hash
from protocol.merkle import keccak256
from tests.support.accounts import dev_account
from tests.support.e2e_market import (ETH, PROVIDER, RENTER, keystore, market, password_file,  # noqa: F401
                                      running_provider)
from tests.support.lease_image import busybox_rootfs, needs_busybox, tar
from tests.support.ssh import keypair, ssh
from unchained_cli.main import app
from devtools.market import wait_for

pytestmark = pytest.mark.skipif(not all(shutil.which(t) or Path(f"/usr/sbin/{t}").exists()
                                        for t in ("bwrap", "sshd", "ssh", "ssh-keygen", "nsenter")),
                                reason="needs bubblewrap, openssh-server and openssh-client (scripts/setup.sh)")


def test_renter_leases_logs_in_over_ssh_and_stopping_shuts_it_out(market, tmp_path, monkeypatch):  # noqa: F811
    renter_keystore, _renter = keystore(tmp_path, RENTER)
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(password_file(tmp_path)))
    keypair(tmp_path / "id")
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

        inside = ssh(tmp_path / "id", port, user, "echo gpus=$CUDA_VISIBLE_DEVICES; hostname")
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
        assert wait_for(lambda: ssh(tmp_path / "id", port, user, "true").returncode == 255, 30)
        assert wait_for(lambda: not (provider.settings.leases_dir / f"lease-{lease_id}").exists(), 10)


@needs_busybox
def test_a_lease_started_with_the_renters_image_boots_that_image(market, tmp_path, monkeypatch):  # noqa: F811
    """`lease start --image` uploads the renter's root file system tarball (privately), signs its
    hash with the SSH key; the provider's worker fetches it, checks the hash and boots it: the
    renter's ssh client finds the image's marker file and not the host's /usr."""
    renter_keystore, _renter = keystore(tmp_path, RENTER)
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(password_file(tmp_path)))
    keypair(tmp_path / "id")
    image = tar(busybox_rootfs(tmp_path, "booted from the renter's image\n"), tmp_path / "image.tar.gz")
    chain = ["--keystore", str(renter_keystore), "--rpc", market.chain.rpc_url,
             "--deployment", str(market.deployment_file)]
    runner = CliRunner()
    with running_provider(market, tmp_path, lease_public_host="127.0.0.1", lease_listen_host="127.0.0.1") as provider:
        started = runner.invoke(app, ["lease", "start", "--provider", provider.address, "--gpus", "1", "--hours", "1",
                                      "--ssh-key", str(tmp_path / "id.pub"), "--image", str(image), "--wait", "60",
                                      "--backend", market.backend_url, *chain], terminal_width=200)
        assert started.exit_code == 0, started.output + (tmp_path / "worker.log").read_text()[-3000:]
        assert f"uploaded as 0x{keccak256(image.read_bytes()).hex()}" in started.output, started.output
        assert "delivery confirmed on-chain" in started.output, started.output
        lease_id = int(re.search(r"lease (\d+):", started.output).group(1))
        command = re.search(r"ssh -p (\d+) (\w+)@127\.0\.0\.1", started.output)
        inside = ssh(tmp_path / "id", int(command.group(1)), command.group(2), "cat /etc/renter-image; ls /usr 2>&1; true")
        assert inside.returncode == 0, inside.stderr
        marker, usr = inside.stdout.splitlines()[:2]
        assert marker == "booted from the renter's image" and "No such file" in usr, inside.stdout
        stopped = runner.invoke(app, ["lease", "stop", str(lease_id), *chain], terminal_width=200)
        assert stopped.exit_code == 0, stopped.output


def test_a_lease_the_provider_never_delivers_is_refunded_in_full(market, tmp_path, monkeypatch):  # noqa: F811
    """The provider is registered (by the test above) but no agent of it runs: no connection details
    come, and once the delivery window has passed, stopping refunds everything."""
    renter_keystore, _renter = keystore(tmp_path, RENTER)
    provider_keystore, provider = keystore(tmp_path, PROVIDER)
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(password_file(tmp_path)))
    keypair(tmp_path / "id")
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


def _refusing_sshd(directory: Path) -> tuple[subprocess.Popen, int, str]:
    """A real sshd on 127.0.0.1 that lets in only a key the renter does not hold: a machine a
    dishonest (or broken) provider offers. Returns the process, its port and host key fingerprint."""
    directory.mkdir()
    keypair(directory / "host_key")
    keypair(directory / "someone_else")
    (directory / "authorized_keys").write_text((directory / "someone_else.pub").read_text())
    port = free_port()
    (directory / "sshd_config").write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {directory / 'host_key'}",
        f"PidFile {directory / 'sshd.pid'}", f"AuthorizedKeysFile {directory / 'authorized_keys'}",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no", ""]))
    if os.getuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    sshd = subprocess.Popen([shutil.which("sshd") or "/usr/sbin/sshd", "-D", "-e", "-f", str(directory / "sshd_config")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    fingerprint = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(directory / "host_key.pub")],
                                 check=True, capture_output=True, text=True).stdout.split()[1]
    assert wait_for(lambda: _listening(port), 10), "the refusing sshd listens"
    return sshd, port, fingerprint


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_a_machine_that_refuses_the_renter_earns_the_provider_nothing(market, tmp_path, monkeypatch):  # noqa: F811
    """Attack (issue 34): the provider signs connection details and binds their hash on-chain
    (offerAccess), but its sshd refuses the renter. `lease start` tries to log in, fails, and
    stops the lease inside its confirm window: the renter gets everything back. (The provider is
    played here by the test, with the registered provider's key: no honest agent runs.)"""
    renter_keystore, renter = keystore(tmp_path, RENTER)
    provider = dev_account(PROVIDER)
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(password_file(tmp_path)))
    keypair(tmp_path / "id")
    sshd, port, fingerprint = _refusing_sshd(tmp_path / "machine")
    leases = market.session.contract("LeaseManager")
    domain = LeaseDomain(market.session.web3.eth.chain_id, leases.address)
    offered: list[int] = []
    lease_id = leases.functions.leaseCount().call() + 1  # the lease `lease start` is about to pay for

    def dishonest_provider() -> None:
        with httpx.Client(base_url=market.backend_url, timeout=10) as api:
            wait_for(lambda: api.get(f"/leases/{lease_id}").status_code == 200
                     and api.get(f"/leases/{lease_id}").json().get("ssh_public_key"), 60)
            access = LeaseAccess(lease_id, "127.0.0.1", port, "lease", fingerprint)
            body = {**access.message(), "signature": "0x" + sign(domain, access, provider.key).hex()}
            del body["leaseId"]
            assert api.put(f"/leases/{lease_id}/access", json=body).status_code == 204
            market.session.send(leases.functions.offerAccess(lease_id, typed_hash(domain, access)), provider.address)
            offered.append(lease_id)

    thread = threading.Thread(target=dishonest_provider, daemon=True)
    thread.start()
    chain = ["--keystore", str(renter_keystore), "--rpc", market.chain.rpc_url,
             "--deployment", str(market.deployment_file)]
    owed_before = leases.functions.owedTo(renter).call()
    try:
        started = CliRunner().invoke(app, ["lease", "start", "--provider", provider.address, "--gpus", "1", "--hours",
                                           "1", "--ssh-key", str(tmp_path / "id.pub"), "--wait", "60",
                                           "--backend", market.backend_url, *chain], terminal_width=200)
    finally:
        thread.join(timeout=60)
        sshd.terminate()
        sshd.wait(timeout=10)
    assert offered, "the dishonest provider offered its machine"
    assert started.exit_code == 1 and "cannot log in" in started.output, started.output
    assert "provider earned 0 ETH" in started.output, started.output
    lease = leases.functions.getLease(offered[0]).call()
    assert lease.status == LeaseStatus.ENDED
    assert leases.functions.owedTo(renter).call() - owed_before == lease.paid


def test_an_expired_lease_is_ended_by_the_provider_agent_and_its_machine_wiped(market, tmp_path, monkeypatch):  # noqa: F811
    """Nobody stops the lease: once the chain's clock passes its end (moved with evm_increaseTime),
    the provider's worker ends it on-chain (LeaseWatcher) and removes the machine. Last in this
    module: it moves the chain's clock by an hour."""
    renter_keystore, _renter = keystore(tmp_path, RENTER)
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(password_file(tmp_path)))
    keypair(tmp_path / "id")
    chain = ["--keystore", str(renter_keystore), "--rpc", market.chain.rpc_url,
             "--deployment", str(market.deployment_file)]
    leases = market.session.contract("LeaseManager")
    with running_provider(market, tmp_path, lease_public_host="127.0.0.1", lease_listen_host="127.0.0.1",
                          lease_check_s=0.5) as provider:
        started = CliRunner().invoke(app, ["lease", "start", "--provider", provider.address, "--gpus", "1", "--hours",
                                           "1", "--ssh-key", str(tmp_path / "id.pub"), "--wait", "60",
                                           "--backend", market.backend_url, *chain], terminal_width=200)
        assert started.exit_code == 0, started.output + (tmp_path / "worker.log").read_text()[-3000:]
        assert "delivery confirmed on-chain" in started.output, started.output
        lease_id = int(re.search(r"lease (\d+):", started.output).group(1))
        assert leases.functions.getDelivery(lease_id).call().confirmedAt != 0
        machine = provider.settings.leases_dir / f"lease-{lease_id}"
        assert machine.exists()

        market.session.web3.provider.make_request("evm_increaseTime", [3600])
        market.session.web3.provider.make_request("anvil_mine", [1])

        assert wait_for(lambda: leases.functions.getLease(lease_id).call().status == LeaseStatus.ENDED, 30), \
            (tmp_path / "worker.log").read_text()[-3000:]
        [ended] = leases.events.LeaseEnded().get_logs(from_block=0, argument_filters={"leaseId": lease_id})
        assert ended.args.endedBy == provider.address and ended.args.providerEarned > 0
        assert wait_for(lambda: not machine.exists(), 30)
