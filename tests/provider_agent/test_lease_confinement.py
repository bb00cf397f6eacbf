"""What a renter logged into its lease with a real ssh client must not be able to borrow from the
provider's host: the agent's environment and descriptors, unbounded disk, memory or CPU, the host's
root user, its services on loopback or its own addresses, private networks, system calls that
container runtimes deny. And what it must get: its own image, egress through slirp4netns.

Each test logs in with OpenSSH into a lease made by LeaseEnvironments (bubblewrap, its own sshd)."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import sys
import threading
from pathlib import Path

import pytest

from devtools.market import wait_for
from provider_agent.lease_env import LeaseEnvError, LeaseEnvironments, LeaseImageRefused
from provider_agent.lease_seccomp import DENIED_X86_64, RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS, evaluate, program
from tests.support.ssh import keypair, ssh
from tests.support.lease_image import busybox_rootfs, needs_busybox, tar

pytestmark = pytest.mark.skipif(
    os.getuid() != 0 or not all(shutil.which(t) or Path(f"/usr/sbin/{t}").exists()
                                for t in ("bwrap", "sshd", "ssh", "ssh-keygen", "slirp4netns", "setpriv", "ip")),
    reason="needs root, bubblewrap, OpenSSH, slirp4netns and iproute2 (scripts/setup.sh)")

SECRET_ENV = {"UNCHAINED_PROVIDER_BROKER_URL": "redis://provider:broker-password-1234@127.0.0.1:6379/0",
              "UNCHAINED_PROVIDER_KEYSTORE": "/root/provider-keystore.json",
              "UNCHAINED_PASSWORD_FILE": "/root/provider.password"}


def _keypair(directory: Path) -> Path:
    return keypair(directory / "id")


def _ssh(key: Path, state, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return ssh(key, state.port, state.user, command, timeout)


@pytest.fixture
def leases(tmp_path, monkeypatch):
    """A provider's agent (4 GPUs, 4 GiB, 1 GiB of lease disk) whose environment holds secrets."""
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    made: list[LeaseEnvironments] = []

    def build(**options) -> LeaseEnvironments:
        settings = {"memory_bytes": 4 << 30, "disk_bytes": 1 << 30, **options}
        environments = LeaseEnvironments(tmp_path / "provider" / "leases", 4, "127.0.0.1", "127.0.0.1", **settings)
        made.append(environments)
        return environments

    yield build
    for environments in made:
        for lease_id in environments.lease_ids():
            environments.stop(lease_id)


def _lease_processes(sandbox_pid: int) -> list[int]:
    """Host pids of every process in the lease's pid namespace."""
    target = os.readlink(f"/proc/{sandbox_pid}/ns/pid")
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "pid") == target:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_the_agents_environment_and_descriptors_stay_out_of_the_lease(leases, tmp_path):
    envs = leases()
    key = _keypair(tmp_path)
    state = envs.start(1, 1, (tmp_path / "id.pub").read_text())
    lease_dir = tmp_path / "provider" / "leases" / "lease-1"
    # Attack: read every process's environment (pid 1 is bwrap's init), then write into pid 1's
    # inherited stderr (the host's sandbox.log on the agent's disk before).
    shown = _ssh(key, state, "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done; echo ---; "
                             "ls -l /proc/1/fd | tail -n +2; echo ---; "
                             "timeout 3 sh -c 'printf renter-wrote-here >> /proc/1/fd/2; "
                             "printf renter-wrote-here >> /proc/1/fd/1'; echo done")
    assert shown.returncode == 0, shown.stderr
    environ, fds, _ = shown.stdout.split("---\n")
    for value in SECRET_ENV.values():
        assert value not in shown.stdout
    assert not [line for line in environ.split() if line.startswith("UNCHAINED_PROVIDER")], environ
    assert "CUDA_VISIBLE_DEVICES=0" in environ.split()  # the session's own allowlisted environment
    targets = {line.split(" -> ")[0].split()[-1]: line.split(" -> ")[1] for line in fds.strip().splitlines()}
    assert targets["0"] == "/dev/null" and targets["1"] == "/dev/null" and targets["2"].startswith("pipe:"), fds
    assert all(t.startswith(("/dev/null", "pipe:", "anon_inode:")) for t in targets.values()), fds  # no file
    for path in lease_dir.rglob("*"):
        if path.is_file():
            assert b"renter-wrote-here" not in path.read_bytes(), path


def test_every_writable_file_system_of_the_lease_is_bounded_by_its_disk_share(leases, tmp_path):
    envs = leases()  # 1 GiB of disk for 4 GPUs: 256 MiB for a lease of one
    key = _keypair(tmp_path)
    state = envs.start(2, 1, (tmp_path / "id.pub").read_text())
    # Attack: fill /tmp, /dev/shm, the home, / and /dev past the share (each was a tmpfs of half the
    # host's memory, or the host's disk).
    for target in ("/tmp", "/dev/shm", "/home/renter", "/", "/dev"):
        filled = _ssh(key, state, f"dd if=/dev/zero of={target.rstrip('/')}/fill bs=1M count=300 2>&1; "
                                  f"echo rc=$?; rm -f {target.rstrip('/')}/fill")
        assert "rc=0" not in filled.stdout, (target, filled.stdout)
    # One budget for all of them: 200 MiB in /tmp leaves less than 100 MiB for /dev/shm.
    shared = _ssh(key, state, "dd if=/dev/zero of=/tmp/a bs=1M count=200 2>/dev/null; echo tmp=$?; "
                              "dd if=/dev/zero of=/dev/shm/b bs=1M count=100 2>/dev/null; echo shm=$?; "
                              "df -k / | tail -1")
    assert "tmp=0" in shared.stdout and "shm=0" not in shared.stdout, shared.stdout
    assert int(shared.stdout.split()[-5]) <= 256 * 1024  # df's size column, in KiB


def test_the_renter_runs_as_an_unprivileged_host_user_within_its_share(leases, tmp_path):
    envs = leases()
    key = _keypair(tmp_path)
    state = envs.start(3, 4, (tmp_path / "id.pub").read_text())  # every GPU of the host
    session = subprocess.Popen(["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-p", str(state.port),
                                f"{state.user}@127.0.0.1", "nproc; echo ready; exec sleep 120"],
                               stdout=subprocess.PIPE, text=True)
    try:
        cpus_inside = int(session.stdout.readline())
        assert session.stdout.readline().strip() == "ready"
        processes = _lease_processes(state.sandbox_pid)
        assert len(processes) >= 3  # bwrap's init, its idle child, the session's sleep
        host_cpus = len(os.sched_getaffinity(0))
        for pid in processes:
            status = Path(f"/proc/{pid}/status").read_text()
            uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
            assert set(uids) == {str(state.uid)} and state.uid >= 2_000_000_000, (pid, uids)  # never root
            groups = next(line.split()[1:] for line in status.splitlines() if line.startswith("Groups:"))
            assert groups == [], (pid, groups)
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
            name = f"/unchained-lease-3-{state.uid}"
            if Path("/sys/fs/cgroup/memory").is_dir():
                for controller in ("memory", "pids", "cpu", "cpuset"):
                    assert f"/sys/fs/cgroup/{controller}{name}" in state.cgroups
                    assert any(controller in line.split(":")[1].split(",") and line.split(":")[2] == name
                               for line in cgroup.splitlines()), (controller, cgroup)
        if host_cpus > 1:
            assert cpus_inside < host_cpus  # the agent keeps a CPU of its own
        memory = Path(f"/sys/fs/cgroup/memory/unchained-lease-3-{state.uid}/memory.limit_in_bytes")
        if memory.exists():
            assert int(memory.read_text()) <= (4 << 30) * 7 // 8  # not all the host's memory
            quota = int(Path(f"/sys/fs/cgroup/cpu/unchained-lease-3-{state.uid}/cpu.cfs_quota_us").read_text())
            assert 0 < quota <= 100_000 * cpus_inside
            assert int(Path(f"/sys/fs/cgroup/pids/unchained-lease-3-{state.uid}/pids.max").read_text()) <= 4096
    finally:
        session.kill()
        session.wait()


def test_memory_beyond_the_share_is_refused_inside_the_lease(leases, tmp_path):
    if not Path("/sys/fs/cgroup/memory").is_dir() and not Path("/sys/fs/cgroup/memory.max").exists():
        pytest.skip("no memory cgroup here")
    envs = leases(memory_bytes=2 << 30)  # the agent keeps 512 MiB: 384 MiB for a lease of 1 GPU of 4
    key = _keypair(tmp_path)
    state = envs.start(4, 1, (tmp_path / "id.pub").read_text())
    small = _ssh(key, state, "python3 -c 'b = bytearray(100 << 20); b[::4096] = b\"x\" * len(b[::4096]); "
                             "print(\"ok\")'")
    assert small.stdout.strip() == "ok", small.stderr
    big = _ssh(key, state, "python3 -c 'b = bytearray(600 << 20); b[::4096] = b\"x\" * len(b[::4096]); "
                           "print(\"ok\")'; echo rc=$?")
    assert "ok" not in big.stdout.split() and "rc=0" not in big.stdout, big.stdout


def test_seccomp_filter_denies_what_container_runtimes_deny(leases, tmp_path):
    envs = leases()
    key = _keypair(tmp_path)
    state = envs.start(5, 1, (tmp_path / "id.pub").read_text())
    # Attack: keyrings, io_uring, namespaces, mounts: calls a container's default profile refuses.
    probe = ("import ctypes, os; libc = ctypes.CDLL(None, use_errno=True)\n"
             "def call(name, nr, *args):\n"
             "    r = libc.syscall(nr, *args); print(name, r, ctypes.get_errno() if r < 0 else 0)\n"
             "call('add_key', 248, b'user', b'k', b'v', 1, -2)\n"
             "call('io_uring_setup', 425, 1, ctypes.create_string_buffer(120))\n"
             "call('unshare', 272, 0x20000)\n"
             "call('getpid', 39)\n")
    shown = _ssh(key, state, f"grep Seccomp: /proc/self/status; python3 -c \"{probe}\"; "
                             "for p in /proc/[0-9]*; do grep -H Seccomp: $p/status; done")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["Seccomp:", "2"]
    calls = {line.split()[0]: line.split()[1:] for line in lines[1:5]}
    assert calls["add_key"] == ["-1", "1"] and calls["io_uring_setup"] == ["-1", "1"], calls  # EPERM
    assert calls["unshare"] == ["-1", "1"] and calls["getpid"][0] != "-1"
    # Every process but bwrap's own init (pid 1, which runs nothing of the renter's) is filtered.
    others = [line for line in lines[5:] if not line.startswith("/proc/1/")]
    assert others and all(line.split()[-1] == "2" for line in others), others


def test_seccomp_program_matches_a_plain_reading_of_its_rules():
    prog = program("x86_64")
    for name, nr in DENIED_X86_64.items():
        assert evaluate(prog, nr) == RET_ERRNO | 1, name
    for allowed in (0, 1, 2, 9, 39, 57, 59, 61, 231, 257):  # read, write, open, mmap, getpid, fork, execve...
        assert evaluate(prog, allowed) == RET_ALLOW
    assert evaluate(prog, 56, arg0=0x01200011) == RET_ALLOW  # clone as fork() calls it
    assert evaluate(prog, 56, arg0=0x10000000 | 17) == RET_ERRNO | 1  # clone(CLONE_NEWUSER)
    assert evaluate(prog, 435) == RET_ERRNO | 38  # clone3: ENOSYS, libc falls back to clone
    assert evaluate(prog, 0x40000000 | 0) == RET_KILL_PROCESS  # the x32 ABI
    assert evaluate(prog, 1, arch=0x40000003) == RET_KILL_PROCESS  # i386


class _Listener:
    """A server on every address of the host, counting who connects."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


def test_the_lease_has_egress_but_not_the_hosts_services_nor_private_ranges(leases, tmp_path):
    envs = leases()
    key = _keypair(tmp_path)
    state = envs.start(6, 1, (tmp_path / "id.pub").read_text())
    host_addresses = [a for a in json.loads(subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True,
                                                           text=True, check=True).stdout)
                      for a in a.get("addr_info", []) if not a["local"].startswith("127.")]
    listener = _Listener()
    for address in host_addresses:  # the host itself reaches it: a refusal inside is the lease's
        socket.create_connection((address["local"], listener.port), timeout=5).close()
    assert wait_for(lambda: listener.accepted == len(host_addresses), 10)
    targets = [("10.0.2.2", 6379), ("10.0.2.2", 5432), ("10.0.2.2", listener.port), ("127.0.0.1", 6379),
               *[(a["local"], listener.port) for a in host_addresses]]
    probe = ("import socket\n"
             f"for host, port in {json.dumps(targets)}:\n"
             "    s = socket.socket(); s.settimeout(5)\n"
             "    print(host, port, s.connect_ex((host, port)))\n")
    # Attack: drop the unreachable routes (the renter holds no capability over its network
    # namespace). Then the routes are read before anything is sent: no packet may leave for a
    # private range.
    dropped = _ssh(key, state, "ip route del unreachable 10.0.0.0/8; ip route del unreachable 192.168.0.0/16; "
                               "ip route add 10.0.0.0/8 via 10.0.2.2; echo done")
    assert dropped.stdout.strip() == "done" and "Operation not permitted" in dropped.stderr, dropped
    shown = _ssh(key, state, f"cat /proc/net/route; echo ---; python3 -c '{probe}'; cat /etc/resolv.conf")
    assert shown.returncode == 0, shown.stderr
    routes_text, rest = shown.stdout.split("---\n")
    routes = {}
    for line in routes_text.splitlines()[1:]:
        iface, dest, gateway, flags, *_, mask = line.split()[:8]
        routes[(socket.inet_ntoa(bytes.fromhex(dest)[::-1]), socket.inet_ntoa(bytes.fromhex(mask)[::-1]))] = \
            (iface, socket.inet_ntoa(bytes.fromhex(gateway)[::-1]), int(flags, 16))
    # Egress: a default route through slirp4netns' gateway, and its DNS forwarder.
    assert routes[("0.0.0.0", "0.0.0.0")][:2] == ("tap0", "10.0.2.2"), routes
    assert "nameserver 10.0.2.3" in rest
    reject = 0x0200  # RTF_REJECT: an unreachable route
    for network in [("10.0.0.0", "255.0.0.0"), ("172.16.0.0", "255.240.0.0"), ("192.168.0.0", "255.255.0.0"),
                    ("169.254.0.0", "255.255.0.0"), ("100.64.0.0", "255.192.0.0"),
                    *[(a["local"], "255.255.255.255") for a in host_addresses]]:
        assert routes[network][2] & reject, network
    results = {(line.split()[0], int(line.split()[1])): int(line.split()[2]) for line in rest.splitlines()
               if line.count(" ") == 2 and line.split()[2].isdigit()}
    assert len(results) == len(targets)
    assert all(code != 0 for code in results.values()), results  # nothing of the host answers
    assert listener.accepted == len(host_addresses)


@needs_busybox
def test_the_renter_brings_its_own_image_as_the_leases_root(leases, tmp_path):
    image = tar(busybox_rootfs(tmp_path, "renter's own tools\n"), tmp_path / "image.tar.gz")
    envs = leases()
    key = _keypair(tmp_path)
    state = envs.start(7, 1, (tmp_path / "id.pub").read_text(), image=image)
    shown = _ssh(key, state, "cat /etc/renter-image; ls /usr/bin/python3 2>&1; id -u; "
                             "touch /installed-by-renter && echo root-writable; df -k / | tail -1")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "renter's own tools"  # the image is the root, not the host's system
    assert "No such file" in lines[1] and lines[2] == "1000" and lines[3] == "root-writable"
    assert int(lines[4].split()[1]) <= 256 * 1024  # the image lives on the lease's disk


@needs_busybox
def test_an_oci_image_layout_is_unpacked_layer_by_layer(leases, tmp_path):
    import hashlib
    rootfs = busybox_rootfs(tmp_path, "layer one\n")
    (rootfs / "etc" / "removed-by-layer-two").write_text("x")
    layout = tmp_path / "oci"
    (layout / "blobs" / "sha256").mkdir(parents=True)

    def blob(data: bytes) -> dict:
        digest = hashlib.sha256(data).hexdigest()
        (layout / "blobs" / "sha256" / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    first = blob(tar(rootfs, tmp_path / "l1.tar.gz").read_bytes())
    upper = tmp_path / "upper"
    (upper / "etc").mkdir(parents=True)
    (upper / "etc" / "renter-image").write_text("layer two\n")
    (upper / "etc" / ".wh.removed-by-layer-two").write_text("")
    second = blob(tar(upper, tmp_path / "l2.tar.gz").read_bytes())
    layer = "application/vnd.oci.image.layer.v1.tar+gzip"
    manifest = blob(json.dumps({"schemaVersion": 2, "layers": [{"mediaType": layer, **first},
                                                              {"mediaType": layer, **second}]}).encode())
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [manifest]}))
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    envs = leases()
    key = _keypair(tmp_path)
    state = envs.start(8, 1, (tmp_path / "id.pub").read_text(), image=layout)
    shown = _ssh(key, state, "cat /etc/renter-image; ls /etc")
    assert shown.stdout.splitlines()[0] == "layer two"
    assert "removed-by-layer-two" not in shown.stdout and "passwd" in shown.stdout


@needs_busybox
def test_an_image_that_writes_outside_its_root_is_refused(leases, tmp_path):
    escape_dir = Path(tempfile.mkdtemp(prefix="lease-escape-"))
    rootfs = busybox_rootfs(tmp_path, "evil\n")
    link = tarfile.TarInfo("./hostlink")
    link.type, link.linkname = tarfile.SYMTYPE, str(escape_dir)
    through = tarfile.TarInfo("./hostlink/planted")
    through.size = 5
    image = tar(rootfs, tmp_path / "evil.tar.gz", [(link, None), (through, b"owned")])
    envs = leases()
    with pytest.raises(LeaseEnvError, match="image"):
        envs.start(9, 1, (_keypair(tmp_path).with_suffix(".pub")).read_text(), image=image)
    assert not (escape_dir / "planted").exists()
    assert envs.lease_ids() == []
    # A hard link to a file of the host (the lease's root must never share an inode with it).
    hard = tarfile.TarInfo("./host-file")
    hard.type, hard.linkname = tarfile.LNKTYPE, str(escape_dir / "secret")
    (escape_dir / "secret").write_text("host")
    with pytest.raises(LeaseEnvError, match="image"):
        envs.start(9, 1, (tmp_path / "id.pub").read_text(),
                   image=tar(rootfs, tmp_path / "hard.tar.gz", [(hard, None)]))
    assert envs.lease_ids() == []
    shutil.rmtree(escape_dir)


@needs_busybox
def test_a_sandbox_that_dies_while_it_is_set_up_is_reported_with_bubblewraps_words(leases, tmp_path):
    # The image's home is a link to a directory the host has and the image lacks: lease_boot finds
    # it, bubblewrap's sandbox cannot chdir there and exits after it reported its pid.
    rootfs = busybox_rootfs(tmp_path, "no home\n")
    (rootfs / "home").mkdir()
    (rootfs / "home" / "renter").symlink_to("/root")
    envs = leases()
    with pytest.raises(LeaseEnvError, match=r"sandbox exited .*lease_boot exited with status \d+.*chdir"):
        envs.start(10, 1, (_keypair(tmp_path).with_suffix(".pub")).read_text(), image=rootfs)
    assert envs.lease_ids() == []


def _bomb(target: Path, members: list[tuple[str, int]]) -> Path:
    """A gzip tarball of files of zeros (name, size): megabytes of archive, far more unpacked."""
    with tarfile.open(target, "w:gz") as archive:
        for name, size in members:
            info = tarfile.TarInfo(name)
            info.size = size
            archive.addfile(info, _Zeros(size))
    return target


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


@needs_busybox
def test_a_decompression_bomb_image_is_refused_within_the_leases_disk(leases, tmp_path):
    envs = leases()  # 1 GiB of disk for 4 GPUs: 256 MiB (and 32768 files) for a lease of one
    key = _keypair(tmp_path).with_suffix(".pub").read_text()
    # Attack: 400 MiB of zeros in a gzip of well under 1 MiB, unpacked as root by the agent.
    bytes_bomb = _bomb(tmp_path / "bytes.tar.gz", [("./bin/sh", 1024), ("./zeros", 400 << 20)])
    assert bytes_bomb.stat().st_size < 1 << 20
    with pytest.raises(LeaseImageRefused, match="image refused"):
        envs.start(10, 1, key, image=bytes_bomb)
    # Attack: 40,000 empty files (a few hundred KiB of archive): the disk's byte size does not
    # bound them, and each is an inode of the host's kernel memory and a header held in memory.
    files_bomb = _bomb(tmp_path / "files.tar.gz", [(f"./f{i}", 0) for i in range(40_000)])
    with pytest.raises(LeaseImageRefused, match="more than 32768 files"):
        envs.start(10, 1, key, image=files_bomb)
    assert envs.lease_ids() == []


@pytest.fixture
def outside_host(tmp_path):
    """A web server on a host of the test's own: a network namespace joined to this machine by a
    veth pair (198.51.100.0/30, a documentation range), standing for the internet the renter
    installs packages from. No packet of the test leaves this machine."""
    tag = f"ul{os.getpid() % 100000}"
    namespace, host_end, far_end = f"{tag}-net", f"{tag}h", f"{tag}n"

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    served = tmp_path / "served"
    served.mkdir()
    (served / "package.txt").write_text("a package from the internet\n")
    server = None
    try:
        ip("netns", "add", namespace)
        ip("link", "add", host_end, "type", "veth", "peer", "name", far_end)
        ip("link", "set", far_end, "netns", namespace)
        ip("addr", "add", "198.51.100.1/30", "dev", host_end)
        ip("link", "set", host_end, "up")
        ip("-n", namespace, "addr", "add", "198.51.100.2/30", "dev", far_end)
        ip("-n", namespace, "link", "set", far_end, "up")
        ip("-n", namespace, "link", "set", "lo", "up")
        server = subprocess.Popen(["ip", "netns", "exec", namespace, sys.executable, "-m", "http.server",
                                   "--bind", "198.51.100.2", "8080", "--directory", str(served)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def answers() -> bool:
            try:
                socket.create_connection(("198.51.100.2", 8080), timeout=1).close()
                return True
            except OSError:
                return False

        assert wait_for(answers, 15)  # reached over the veth pair before any lease tries
        yield "http://198.51.100.2:8080/package.txt"
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", host_end], capture_output=True)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def test_the_renter_downloads_from_outside_through_slirp4netns(leases, tmp_path, outside_host):
    envs = leases()
    key = _keypair(tmp_path)
    state = envs.start(10, 1, (tmp_path / "id.pub").read_text())
    fetched = _ssh(key, state, f"python3 -c 'import urllib.request; "
                               f"print(urllib.request.urlopen(\"{outside_host}\", timeout=20).read().decode())'")
    assert fetched.returncode == 0, fetched.stderr
    assert fetched.stdout.strip() == "a package from the internet"


def test_leased_device_nodes_stay_usable_devices_for_the_unprivileged_sandbox(leases, tmp_path):
    """GPU nodes reach the sandbox through binds made as root (the lease's user cannot reach the
    agent's paths): they must stay devices, not nodev files. /dev/null and /dev/zero's numbers
    stand in for a GPU and the control node."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name, minor in (("nvidia0", 3), ("nvidia1", 3), ("nvidiactl", 5)):
        os.mknod(dev / name, 0o20666, os.makedev(1, minor))
        os.chmod(dev / name, 0o666)
    envs = leases(dev_dir=dev)
    key = _keypair(tmp_path)
    state = envs.start(11, 1, (tmp_path / "id.pub").read_text())
    shown = _ssh(key, state, "ls /dev | grep nvidia; echo data > /dev/nvidia0 && echo written; "
                             "head -c 3 /dev/nvidiactl | od -An -tx1")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["nvidia0", "nvidiactl", "written", "00", "00", "00"]
