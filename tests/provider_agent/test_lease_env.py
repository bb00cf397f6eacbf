"""Lease environments with a real sshd, bubblewrap and ssh client: the renter's key gets in, lands
in a sandbox with only its GPUs, cannot see the agent's files or another lease's, and everything
is gone when the lease ends."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from protocol.lease_access import LeaseMessageError
from tests.support.ssh import keypair, ssh
from provider_agent.lease_env import (LeaseEnvError, LeaseEnvironments, cuda_visible_devices, gpu_device_nodes,
                                      is_alive, limits_for, pick_gpus)

pytestmark = pytest.mark.skipif(not all(shutil.which(t) or Path(f"/usr/sbin/{t}").exists()
                                        for t in ("bwrap", "sshd", "ssh", "ssh-keygen", "nsenter")),
                                reason="needs bubblewrap, openssh-server and openssh-client (scripts/setup.sh)")


def _keypair(directory: Path, name: str) -> Path:
    return keypair(directory / name)


def _ssh(key: Path, state, command: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return ssh(key, state.port, state.user, command, timeout)


@pytest.fixture
def agent_dir(tmp_path):
    """The agent's data directory: its keystore beside the leases' root, fake GPU device nodes."""
    data = tmp_path / "provider"
    data.mkdir()
    (data / "keystore.json").write_text('{"crypto": "the agent\'s key"}')
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm"):
        (dev / name).write_text(name)
    return data, dev


@pytest.fixture
def envs(agent_dir):
    data, dev = agent_dir
    environments = LeaseEnvironments(data / "leases", 4, "127.0.0.1", "127.0.0.1", dev_dir=dev,
                                     memory_bytes=4 << 30, disk_bytes=1 << 30)
    yield environments
    for state_file in (data / "leases").glob("lease-*/state.json"):
        environments.stop(int(state_file.parent.name.split("-")[1]))


def test_pick_gpus_skips_those_other_leases_hold():
    assert pick_gpus(4, {0, 2}, 2) == [1, 3]
    with pytest.raises(LeaseEnvError):
        pick_gpus(4, {0, 1, 2}, 2)


def test_device_nodes_are_the_leased_gpus_and_the_control_nodes(tmp_path):
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert [p.name for p in gpu_device_nodes(tmp_path, [1, 2])] == ["nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"]
    assert gpu_device_nodes(tmp_path, [5]) == [tmp_path / "nvidiactl", tmp_path / "nvidia-uvm"]
    assert cuda_visible_devices([1, 2]) == "1,2"


def test_limits_are_in_proportion_to_the_gpus_leased_of_what_the_agent_leaves():
    # 9 CPUs, 64 GiB: the agent keeps CPU 0 and 8 GiB; each of 4 GPUs owns 2 of the other 8 CPUs.
    limits = limits_for([0], 4, list(range(9)), 64 << 30, 400 << 30)
    assert (limits.cpus, limits.memory_bytes, limits.disk_bytes) == ((1, 2), 14 << 30, 100 << 30)
    assert limits_for([2, 3], 4, list(range(9)), 64 << 30, 400 << 30).cpus == (5, 6, 7, 8)
    everything = limits_for([0, 1, 2, 3], 4, list(range(9)), 64 << 30, 400 << 30)
    assert 0 not in everything.cpus and everything.memory_bytes == 56 << 30  # a lease of all GPUs too
    assert limits_for([3], 4, [0, 1], 64 << 30, 400 << 30).cpus == (1,)  # never no CPU, never the agent's
    assert limits_for([0], 1, [0], 64 << 30, 400 << 30).cpus == (0,)  # one CPU in all: shared


def test_a_private_key_or_junk_is_refused_as_a_lease_key(envs):
    with pytest.raises(LeaseMessageError):
        envs.start(1, 1, "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n")
    with pytest.raises(LeaseMessageError):
        envs.start(1, 1, 'command="/bin/sh" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4 me')


def test_renter_gets_an_isolated_machine_over_ssh_and_loses_it_at_the_end(envs, agent_dir, tmp_path):
    data, _dev = agent_dir
    alice, bob = _keypair(tmp_path, "alice"), _keypair(tmp_path, "bob")
    first = envs.start(1, 2, (tmp_path / "alice.pub").read_text())
    second = envs.start(2, 2, (tmp_path / "bob.pub").read_text())
    assert (first.gpus, second.gpus) == ([0, 1], [2, 3])
    assert envs.start(1, 2, (tmp_path / "alice.pub").read_text()) == first  # a repeated start changes nothing
    assert envs.lease_ids() == [1, 2]

    shown = _ssh(alice, first, "echo cuda=$CUDA_VISIBLE_DEVICES; ls /dev | grep nvidia; id -u; "
                               "echo secret-of-lease-1 > ~/notes; cat ~/notes")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.split()
    assert lines[0] == "cuda=0,1"
    assert sorted(lines[1:-2]) == ["nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"]
    assert lines[-2:] == ["1000", "secret-of-lease-1"]

    # Attack: read the agent's keystore, the lease root, the other lease's files; reach the host.
    snoop = _ssh(bob, second, f"cat {data / 'keystore.json'}; ls {data}; cat /home/renter/notes; "
                              f"ls {data / 'leases'}; cat /etc/shadow; ls /dev | grep nvidia; echo done")
    assert "the agent's key" not in snoop.stdout and "secret-of-lease-1" not in snoop.stdout
    assert sorted(snoop.stdout.split()) == ["done", "nvidia-uvm", "nvidia2", "nvidia3", "nvidiactl"]
    assert "No such file" in snoop.stderr

    # Attack: a second renter's key on the first lease.
    refused = _ssh(bob, first, "true")
    assert refused.returncode == 255 and "Permission denied" in refused.stderr

    session = subprocess.Popen(["ssh", "-i", str(alice), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-p", str(first.port),
                                f"{first.user}@127.0.0.1", "echo started; sleep 600 & sleep 600"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert session.stdout.readline().strip() == "started"
    started = time.monotonic()
    assert envs.stop(1)
    session.wait(timeout=10)  # the open session dies with the lease
    assert time.monotonic() - started < 10
    assert not is_alive(first.sandbox_pid)  # pid 1 gone: every process inside is gone
    assert not (data / "leases" / "lease-1").exists()
    gone = _ssh(alice, first, "true")
    assert gone.returncode == 255  # nothing answers for the key any more
    assert not envs.stop(1) and envs.lease_ids() == [2]
    still = _ssh(bob, second, "echo alive")  # the other lease is untouched
    assert still.stdout.strip() == "alive"


def test_renter_runs_pog_inside_the_lease_and_sees_what_it_got(envs, tmp_path):
    key = _keypair(tmp_path, "renter")
    state = envs.start(3, 1, (tmp_path / "renter.pub").read_text())
    ran = _ssh(key, state, "unchained pog run --n 64 --k 4 2>&1", timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "class" in ran.stdout and "CPU" in ran.stdout and "pass" in ran.stdout
