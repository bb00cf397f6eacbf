"""A lease's machine: an isolated environment the renter reaches over SSH, wiped at the end.

Each lease gets
- one long-lived bubblewrap sandbox (Linux namespaces: mount, pid, network, ipc, uts, user,
  cgroup) run by an unprivileged host user of its own (`lease_uid`: never root, never a user
  with rights, even when the agent runs as root), whose processes hold no capabilities and no new
  privileges and run under a seccomp filter (`lease_seccomp`) that denies what container
  runtimes deny by default;
- a root file system: the renter's image (a root file system directory or tarball, or an OCI
  image layout, unpacked by `lease_boot`), else a skeleton over which the host's system (/usr, a
  few /etc files, never /etc/shadow or its SSH host keys) and this Python installation (so
  `unchained pog run` works inside) are bound read-only. Root, /tmp, the home and /dev/shm all
  live on one tmpfs of the lease's disk share, made in a private mount namespace: together they
  hold no more than the share, and nothing of the agent's data directory is in the sandbox;
- only the leased GPUs' device nodes and CUDA_VISIBLE_DEVICES naming them;
- an environment built from an allowlist and no descriptor of the agent's: the sandbox's
  processes get /dev/null or a pipe only the agent reads, never a file on the provider's disk;
- egress to the internet through slirp4netns (user-mode networking, as rootless Podman does, run
  as the lease's user): the host's loopback is refused (`--disable-host-loopback`), and the
  private, link-local, shared and reserved ranges and every address of the host itself are
  unreachable routes in the lease's network namespace, which the renter holds no capability over;
- its own OpenSSH sshd (Debian's), run with its own config on a free high port, its own host key,
  an AuthorizedKeysFile holding only the lease's key (with `restrict`), and a ForceCommand
  (`lease_enter`) that enters the sandbox as the renter, in the lease's cgroups and CPUs, under
  the same seccomp filter;
- CPU, memory and pids in proportion to the GPUs leased, of what the agent leaves to leases
  (`limits_for`: the agent keeps a CPU and an eighth of the memory): a CPU set of its own, cgroup
  memory, CPU-time, cpuset and pid limits where the cgroup hierarchy is writable.

`stop` kills the sshd and every session it spawned, slirp4netns, then the sandbox's pid 1, which
takes every process inside with it (the kernel kills a pid namespace with its init); the disk
tmpfs dies with its mount namespace, and the lease's directory (host key, authorized key) is
removed, so the key no longer opens anything. State lives in the lease's directory
(`state.json`), not in memory: Celery's prefork children that start and end a lease are
different processes. Leases need the agent to run as root (it mounts the disk, maps the lease's
user and sets up the network namespace).

Podman or Docker would give the same guarantees; neither runs containers on a cgroup v1 hybrid
host such as the project's test machines, so every lease uses bubblewrap, which needs no daemon.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import logging
import os
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

from protocol.lease_access import LeaseAccess, normalize_ssh_key
from client.ports import free_port
from provider_agent import ProviderAgentError
from provider_agent.lease_boot import IMAGE_REFUSED
from provider_agent.lease_sandbox import (LEASE_TOOLS, SANDBOX_UID, cuda_visible_devices, device_binds, gpu_device_nodes,
                                          sandbox_argv)
from provider_agent.lease_seccomp import SeccompUnsupported, program as seccomp_program

log = logging.getLogger(__name__)

SANDBOX_HOME = "/home/renter"
# Host uids of the leases' sandboxes: one per lease, far above any user's or subuid range; no
# account, no group, no file on the host belongs to them.
LEASE_UID_BASE = 2_100_000_000
LEASE_UID_SPAN = 10_000_000
# Where lease_boot mounts a lease's disk, in the lease's private mount namespace only (on the
# host it stays an empty directory).
STAGE = Path("/run/unchained-lease")
PACKAGES = ("protocol", "client", "provider_agent", "backend", "renter", "verifier", "unchained_cli")
START_TIMEOUT_S = 30.0
# /etc entries a shell, Python and CUDA need; the rest of /etc (shadow, SSH host keys) stays out.
ETC_FILES = ("passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
             "alternatives", "ssl", "ca-certificates", "bash.bashrc", "profile", "profile.d", "inputrc", "terminfo",
             "mime.types", "os-release")
# What a renter's egress may never reach: private, shared, link-local (cloud metadata), loopback,
# reserved and multicast ranges, besides every address of the host itself. slirp4netns' own
# network (10.0.2.0/24: its gateway, which refuses the host's loopback, and its DNS forwarder) is
# more specific and stays reachable.
BLOCKED_RANGES = ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
                  "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4")
SLIRP_DNS = "10.0.2.3"
NS_GET_USERNS = 0xB701  # ioctl: the user namespace that owns a namespace
# The agent's share of the host, which no lease gets.
AGENT_CPUS = 1
AGENT_MEMORY_FRACTION = 8
AGENT_MEMORY_MIN = 512 << 20
ENV_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# A static busybox from the host runs the sandbox's idle process when the image is the renter's
# (an image need not have `sleep`); Debian's busybox-static.
STATIC_SLEEPER = Path("/bin/busybox")
# Files (inodes) a lease's disk holds: one per BYTES_PER_FILE of its share, at least MIN_FILES.
# Root file systems average well over 8 KiB a file (Debian's slim images about 12 KiB); a tmpfs's
# default, half the host's memory pages, would let an image of millions of empty files (a small
# archive) pin the host's kernel memory.
BYTES_PER_FILE = 8192
MIN_FILES = 4096


class LeaseEnvError(ProviderAgentError):
    """A lease environment could not be created or removed; the message says what is missing."""


class LeaseImageRefused(LeaseEnvError):
    """The renter's image cannot be the lease's root: it is missing, not what its hash says, leaves
    its root, does not fit the lease's disk or does not unpack. The renter's fault, not the host's."""


@dataclass(frozen=True)
class Limits:
    cpus: tuple[int, ...]  # CPU ids the lease's processes may run on
    memory_bytes: int
    disk_bytes: int  # size of the lease's disk (root, /tmp, home, /dev/shm together)
    pids: int


def lease_uid(root: Path, lease_id: int) -> int:
    """The unprivileged host uid (and gid) a lease's sandbox runs as: one per lease of one agent's
    leases directory (two agents on one host, e.g. tests, do not share one)."""
    return LEASE_UID_BASE + zlib.crc32(f"{Path(root).resolve()}:{int(lease_id)}".encode()) % LEASE_UID_SPAN


def limits_for(gpu_indices: list[int], total_gpus: int, cpus: list[int], memory_bytes: int,
               disk_bytes: int) -> Limits:
    """The lease's share of what the agent leaves to leases: the agent keeps AGENT_CPUS CPUs (when
    there are more) and an eighth of the memory; the rest is split by GPU. Each GPU index owns its
    own slice of the CPUs, so leases of different GPUs do not share CPUs where there are enough."""
    gpus = len(gpu_indices)
    if not 0 < gpus <= max(total_gpus, gpus):
        raise LeaseEnvError(f"{gpus} GPU(s) leased of {total_gpus}")
    total = max(total_gpus, gpus, max(gpu_indices) + 1)
    share = gpus / total
    ordered = sorted(cpus)
    leasable = ordered[AGENT_CPUS:] if len(ordered) > AGENT_CPUS else ordered
    chosen = sorted({cpu for g in gpu_indices
                     for cpu in leasable[g * len(leasable) // total:(g + 1) * len(leasable) // total]})
    if not chosen:  # fewer CPUs than GPUs: share one
        chosen = [leasable[gpu_indices[0] % len(leasable)]]
    memory = memory_bytes - min(memory_bytes // 2, max(AGENT_MEMORY_MIN, memory_bytes // AGENT_MEMORY_FRACTION))
    return Limits(tuple(chosen), max(256 << 20, int(memory * share)), max(64 << 20, int(disk_bytes * share)),
                  max(256, int(4096 * share)))


def pick_gpus(total: int, taken: set[int], count: int) -> list[int]:
    """The first `count` GPU indices of `total` that no other lease holds."""
    free = [i for i in range(total) if i not in taken]
    if len(free) < count:
        raise LeaseEnvError(f"{count} GPU(s) wanted, {len(free)} free of {total}")
    return free[:count]


def _system_binds() -> list[str]:
    """/usr read-only, /bin, /lib... as the symlinks or directories they are here, and from /etc
    only what programs need to run (never /etc/shadow or the system's SSH host keys)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    for name in ETC_FILES:
        if Path("/etc", name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return args


def _python_dirs() -> list[str]:
    """This interpreter, its environment and the unchained packages, to be bound read-only at the
    same paths: the renter can run `unchained pog run` inside. Only the package directories, never
    the directory around them (which may hold the agent's files)."""
    dirs: list[str] = []
    for prefix in sorted({sys.base_prefix, sys.prefix}):
        if not prefix.startswith("/usr/") and prefix != "/usr":
            dirs.append(prefix)
    for name in PACKAGES:
        module = sys.modules.get(name) or __import__(name)
        package_dir = str(Path(module.__file__).resolve().parent)
        if not package_dir.startswith(sys.prefix):
            dirs.append(package_dir)
    return dirs


def _is_static(path: Path) -> bool:
    """True for an ELF executable without a program interpreter (it runs in any root file system)."""
    try:
        head = path.read_bytes()[:65536]
    except OSError:
        return False
    if head[:5] != b"\x7fELF\x02":  # 64-bit ELF
        return False
    phoff, = struct.unpack_from("<Q", head, 0x20)
    size, count = struct.unpack_from("<HH", head, 0x36)
    return all(struct.unpack_from("<I", head, phoff + i * size)[0] != 3 for i in range(count))  # PT_INTERP


def _host_addresses() -> list[str]:
    """Every IPv4 address of this host's interfaces (reachable from a lease through slirp4netns
    unless blocked: a service listening on 0.0.0.0 would answer)."""
    shown = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True, check=True).stdout
    return sorted({a["local"] for link in json.loads(shown) for a in link.get("addr_info", []) if "local" in a})


@dataclass
class LeaseState:
    lease_id: int
    gpus: list[int]
    port: int
    host: str
    user: str
    host_key_fingerprint: str
    sandbox_pid: int  # the sandbox's pid 1, seen from outside
    sshd_pid: int
    cgroups: list[str]
    uid: int = 0  # the host uid the sandbox runs as
    image: str | None = None

    def access(self) -> LeaseAccess:
        return LeaseAccess(self.lease_id, self.host, self.port, self.user, self.host_key_fingerprint)


class _Boot:
    """lease_boot (bubblewrap's launcher once it execs it) and the read end of its stderr. bwrap
    reports the sandbox's pid as soon as it forked it, before the sandbox has mounted its root:
    a sandbox that fails there is gone by the time its network is set up, and its stderr is
    where bwrap says why."""

    def __init__(self, process: subprocess.Popen[bytes], errors: int) -> None:
        self.process = process
        self.errors = errors

    def wait_set_up(self, sandbox_pid: int) -> None:
        """Waits until the sandbox's pid 1 has forked its idle process (bwrap does that once the
        sandbox is built), or fails with bwrap's words when it exited first."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _descendants(sandbox_pid):
            if not is_alive(sandbox_pid):
                raise self.failure("while it was set up")
            if time.monotonic() >= deadline:
                raise LeaseEnvError(f"the lease's sandbox was not set up after {START_TIMEOUT_S:.0f} s")
            time.sleep(0.01)

    def failure(self, when: str) -> LeaseEnvError:
        """The error for a sandbox that exited `when`: lease_boot's status and stderr."""
        try:
            status = f"exited with status {self.process.wait(timeout=5)}"  # bwrap exits with its sandbox
        except subprocess.TimeoutExpired:
            status = "still runs"
        return LeaseEnvError(f"the lease's sandbox exited {when}; lease_boot {status}: {self.said()}")

    def said(self) -> str:
        """What lease_boot and bwrap wrote to stderr so far (without waiting for more)."""
        os.set_blocking(self.errors, False)
        try:
            text = os.read(self.errors, 1 << 16)
        except BlockingIOError:
            text = b""
        return text[-800:].decode(errors="replace").strip() or "nothing on stderr"

    def close(self) -> None:
        os.close(self.errors)


class LeaseEnvironments:
    """Creates and removes lease environments under `root` (0700, inside the agent's data dir).
    `image`: the renter's root file system (directory, tarball or OCI image layout) for leases
    started without one of their own; None: the host's system, read-only."""

    def __init__(self, root: Path, total_gpus: int, public_host: str, listen_host: str = "0.0.0.0",
                 memory_bytes: int | None = None, disk_bytes: int = 8 << 30, dev_dir: Path = Path("/dev"),
                 cgroup_root: Path = Path("/sys/fs/cgroup"), image: Path | None = None) -> None:
        self.root = root
        self.total_gpus = total_gpus
        self.public_host = public_host
        self.listen_host = listen_host
        self.memory_bytes = memory_bytes or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        self.disk_bytes = disk_bytes
        self.dev_dir = dev_dir
        self.cgroup_root = cgroup_root
        self.image = image

    @staticmethod
    def check_tools(image: Path | None = None) -> None:
        if os.getuid() != 0:
            raise LeaseEnvError("leases need the provider agent to run as root (each lease's sandbox runs as an "
                                "unprivileged user of its own on a disk of its own)")
        missing = [tool for tool in LEASE_TOOLS if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()]
        if image is not None and not _is_static(STATIC_SLEEPER):
            missing.append("busybox-static")
        if missing:
            raise LeaseEnvError(f"missing {', '.join(missing)}: apt-get install bubblewrap openssh-server "
                                "openssh-client util-linux slirp4netns iproute2 busybox-static")

    def _dir(self, lease_id: int) -> Path:
        return self.root / f"lease-{int(lease_id)}"

    def state(self, lease_id: int) -> LeaseState | None:
        path = self._dir(lease_id) / "state.json"
        return LeaseState(**json.loads(path.read_text())) if path.exists() else None

    def lease_ids(self) -> list[int]:
        """Leases with an environment here (running, or left by an agent that stopped)."""
        return sorted(int(p.parent.name.split("-", 1)[1]) for p in self.root.glob("lease-*/state.json"))

    def _taken_gpus(self) -> set[int]:
        taken: set[int] = set()
        for path in self.root.glob("lease-*/state.json"):
            taken.update(json.loads(path.read_text())["gpus"])
        return taken

    def start(self, lease_id: int, gpu_count: int, ssh_public_key: str, image: Path | None = None) -> LeaseState:
        """Creates the environment (idempotent: an existing one is returned as it is). `image`:
        the renter's root file system, else this object's default."""
        image = image if image is not None else self.image
        self.check_tools(image)
        key = normalize_ssh_key(ssh_public_key)
        if image is not None and not Path(image).exists():
            raise LeaseImageRefused(f"lease {lease_id}: image {image} not found")
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.root / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # GPU allocation across the worker's processes
            existing = self.state(lease_id)
            if existing is not None:
                return existing
            gpus = pick_gpus(max(self.total_gpus, gpu_count), self._taken_gpus(), gpu_count)
            directory = self._dir(lease_id)
            shutil.rmtree(directory, ignore_errors=True)  # a half-made one from a crash
            directory.mkdir(mode=0o700)
            try:
                state = self._create(lease_id, directory, gpus, key, image)
            except BaseException:
                self._teardown(directory, None)
                raise
            (directory / "state.json").write_text(json.dumps(asdict(state)))
        log.info("lease %s: environment up, GPUs %s, uid %s, sshd on %s:%s", lease_id, gpus, state.uid,
                 self.public_host, state.port)
        return state

    def _create(self, lease_id: int, directory: Path, gpus: list[int], key: str, image: Path | None) -> LeaseState:
        limits = limits_for(gpus, max(self.total_gpus, len(gpus)), sorted(os.sched_getaffinity(0)),
                            self.memory_bytes, self.disk_bytes)
        try:
            (directory / "seccomp.bpf").write_bytes(seccomp_program())
        except SeccompUnsupported as exc:
            raise LeaseEnvError(str(exc)) from exc
        uid = lease_uid(self.root, lease_id)
        cgroups = self._make_cgroups(lease_id, uid, limits)
        (directory / "cgroups.json").write_text(json.dumps(cgroups))
        sandbox_pid, boot = self._start_sandbox(directory, gpus, limits, cgroups, uid, image)
        try:
            (directory / "sandbox.pid").write_text(str(sandbox_pid))
            boot.wait_set_up(sandbox_pid)
            self._start_network(directory, sandbox_pid, boot, uid, cgroups)
        finally:
            boot.close()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"unchained-lease-{lease_id}",
                        "-f", str(directory / "host_key")], check=True, capture_output=True)
        fingerprint = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(directory / "host_key.pub")],
                                     check=True, capture_output=True, text=True).stdout.split()[1]
        # `restrict`: no forwarding, no agent, no X11, no ~/.ssh/rc, even if the config allowed them.
        (directory / "authorized_keys").write_text(f"restrict,pty {key}\n")
        os.chmod(directory / "authorized_keys", 0o600)
        (directory / "enter.json").write_text(json.dumps(self._enter_config(sandbox_pid, gpus, limits, cgroups,
                                                                            directory, image)))
        enter = directory / "enter.sh"
        command = [sys.executable, "-I", "-S", str(Path(__file__).with_name("lease_enter.py")),
                   str(directory / "enter.json")]
        enter.write_text("#!/bin/sh\n# ForceCommand of this lease's sshd (written by provider_agent.lease_env)\n"
                         f"exec {shlex.join(command)}\n")
        os.chmod(enter, 0o700)
        port = free_port(self.listen_host)
        (directory / "sshd_config").write_text(self._sshd_config(directory, port, "root"))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        with open(directory / "sshd.log", "ab") as errors:
            sshd = subprocess.Popen([shutil.which("sshd") or "/usr/sbin/sshd", "-D", "-e", "-f",
                                     str(directory / "sshd_config")], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True,
                                    env={"PATH": ENV_PATH})  # nothing of the agent's environment
        (directory / "sshd.pid").write_text(str(sshd.pid))
        self._wait_listening(port, sshd, directory)
        return LeaseState(lease_id, gpus, port, self.public_host, "root", fingerprint, sandbox_pid, sshd.pid, cgroups,
                          uid, str(image) if image is not None else None)

    def _start_sandbox(self, directory: Path, gpus: list[int], limits: Limits, cgroups: list[str], uid: int,
                       image: Path | None) -> tuple[int, _Boot]:
        """lease_boot as root, which mounts the lease's disk, unpacks the image and becomes `uid`
        to run bubblewrap. The sandbox's descriptors: stdin and stdout /dev/null, stderr a pipe
        read here only until the sandbox's network is up (for bubblewrap's errors), nothing else.
        Returns the sandbox's pid 1 and lease_boot."""
        info_read, info_write = os.pipe()  # bwrap writes the sandbox's pid (JSON) here
        err_read, err_write = os.pipe()
        seccomp = os.open(directory / "seccomp.bpf", os.O_RDONLY)
        binds: list[tuple[str, str, bool]] = []
        devices: list[tuple[str, str]] = []
        for i, node in enumerate(gpu_device_nodes(self.dev_dir, gpus)):
            binds.append((f"dev{i}", str(node), False))
            devices.append((str(STAGE / "bind" / f"dev{i}"), node.name))
        system: list[str] = []
        sleeper: list[str] = []
        if image is None:
            system = _system_binds()
            for i, path in enumerate(_python_dirs()):
                binds.append((f"py{i}", path, True))
                system += ["--ro-bind", str(STAGE / "bind" / f"py{i}"), path]
            command = ["sleep", "infinity"]
        else:
            binds.append(("sleeper", str(STATIC_SLEEPER), True))
            sleeper = ["--ro-bind", str(STAGE / "bind" / "sleeper"), "/dev/.lease/busybox"]
            command = ["/dev/.lease/busybox", "sleep", "2147483647"]  # busybox takes its name from argv[0]
        argv = sandbox_argv(shutil.which("bwrap") or "bwrap", ["--bind", str(STAGE / "disk" / "root"), "/", *system],
                            [*device_binds(devices), *sleeper, "--bind", str(STAGE / "disk" / "shm"), "/dev/shm"],
                            seccomp, command, options=["--chdir", SANDBOX_HOME, "--info-fd", str(info_write)])
        config = {"stage": str(STAGE), "uid": uid, "gid": uid, "disk_bytes": limits.disk_bytes,
                  "max_files": max(MIN_FILES, limits.disk_bytes // BYTES_PER_FILE),
                  "image": str(image) if image is not None else None, "home": SANDBOX_HOME, "dns": SLIRP_DNS,
                  "binds": binds, "argv": argv,
                  "env": {"PATH": ENV_PATH, "HOME": SANDBOX_HOME, "LANG": "C.UTF-8"}}
        (directory / "boot.json").write_text(json.dumps(config))
        STAGE.mkdir(mode=0o755, parents=True, exist_ok=True)

        def prepare() -> None:  # in the child, before lease_boot: the lease's CPUs and cgroups
            os.sched_setaffinity(0, limits.cpus)
            for cgroup in cgroups:
                Path(cgroup, "cgroup.procs").write_text(str(os.getpid()))

        try:
            proc = subprocess.Popen([sys.executable, "-I", "-S", str(Path(__file__).with_name("lease_boot.py")),
                                     str(directory / "boot.json")], pass_fds=(info_write, seccomp),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err_write,
                                    start_new_session=True, preexec_fn=prepare, env={"PATH": ENV_PATH})
        finally:
            for fd in (info_write, err_write, seccomp):
                os.close(fd)
        with os.fdopen(info_read) as info:
            text = info.read()  # bwrap closes its end once its sandbox is forked (or on failure)
        boot = _Boot(proc, err_read)
        if not text:
            try:
                proc.wait(timeout=START_TIMEOUT_S)
                refused = LeaseImageRefused if proc.returncode == IMAGE_REFUSED else LeaseEnvError
                raise refused(f"the lease's sandbox did not start: {boot.said()}")
            finally:
                boot.close()
        (directory / "bwrap.pid").write_text(str(proc.pid))
        return int(json.loads(text)["child-pid"]), boot

    def _start_network(self, directory: Path, sandbox_pid: int, boot: _Boot, uid: int, cgroups: list[str]) -> None:
        """slirp4netns, as the lease's user, gives the sandbox's network namespace a tap device
        routed to the internet; then the blocked ranges and the host's own addresses become
        unreachable routes there (set from outside: the renter has no capability over them).
        A sandbox gone meanwhile is reported with lease_boot's status and stderr."""
        try:
            net = os.open(f"/proc/{sandbox_pid}/ns/net", os.O_RDONLY)
        except FileNotFoundError:
            raise boot.failure("before its network was set up") from None
        owner = fcntl.ioctl(net, NS_GET_USERNS)  # bwrap's outer user namespace, which owns `net`
        ready_read, ready_write = os.pipe()
        try:
            slirp = subprocess.Popen(
                ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "slirp4netns", "--configure",
                 "--mtu=65520", "--disable-host-loopback", "--enable-seccomp", f"--ready-fd={ready_write}",
                 f"--userns-path=/proc/self/fd/{owner}", "--netns-type=path", f"/proc/self/fd/{net}", "tap0"],
                pass_fds=(net, owner, ready_write), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True, env={"PATH": ENV_PATH})
        finally:
            for fd in (net, owner, ready_write):
                os.close(fd)
        (directory / "slirp.pid").write_text(str(slirp.pid))
        for cgroup in cgroups:
            Path(cgroup, "cgroup.procs").write_text(str(slirp.pid))
        with os.fdopen(ready_read, "rb") as ready:
            if not ready.read(1):
                if not is_alive(sandbox_pid):
                    raise boot.failure("before its network was set up")
                raise LeaseEnvError("slirp4netns did not configure the lease's network")
        routes = [f"route add unreachable {cidr}" for cidr in BLOCKED_RANGES]
        routes += [f"route add unreachable {address}/32" for address in _host_addresses()
                   if not ipaddress.ip_address(address).is_loopback]
        done = subprocess.run(["nsenter", f"--net=/proc/{sandbox_pid}/ns/net", "ip", "-batch", "-"],
                              input="\n".join(routes) + "\n", capture_output=True, text=True, env={"PATH": ENV_PATH})
        if done.returncode != 0:
            if not is_alive(sandbox_pid):
                raise boot.failure("before its network filter was set")
            raise LeaseEnvError(f"the lease's network filter could not be set: {done.stderr.strip()[-300:]}")

    def _make_cgroups(self, lease_id: int, uid: int, limits: Limits) -> list[str]:
        """Memory, CPU-time, CPU set and pid limits in a cgroup per lease where the hierarchy is
        writable (cgroup v2, else v1's memory, cpu, cpuset and pids controllers); none, with a
        warning, where it is not. Named after the lease and its uid: another agent's lease of the
        same number on this host has another."""
        name = f"unchained-lease-{lease_id}-{uid}"
        made: list[str] = []
        cpus = ",".join(str(c) for c in limits.cpus)
        quota = str(100_000 * len(limits.cpus))
        try:
            if (self.cgroup_root / "cgroup.controllers").exists():  # v2 (not on this project's hosts: untested)
                try:  # the controllers must be enabled for the root's children first
                    (self.cgroup_root / "cgroup.subtree_control").write_text("+memory +pids +cpu +cpuset")
                except OSError as exc:
                    log.warning("lease %s: cgroup v2 controllers not all enabled (%s)", lease_id, exc)
                group = self.cgroup_root / name
                group.mkdir(exist_ok=True)
                made.append(str(group))
                for knob, value in (("memory.max", str(limits.memory_bytes)), ("memory.swap.max", "0"),
                                    ("pids.max", str(limits.pids)), ("cpu.max", f"{quota} 100000"),
                                    ("cpuset.cpus", cpus)):
                    if (group / knob).exists():
                        (group / knob).write_text(value)
            else:
                for controller, settings in (
                        ("memory", (("memory.limit_in_bytes", str(limits.memory_bytes)),)),
                        ("pids", (("pids.max", str(limits.pids)),)),
                        ("cpu", (("cpu.cfs_period_us", "100000"), ("cpu.cfs_quota_us", quota))),
                        ("cpuset", (("cpuset.cpus", cpus), ("cpuset.mems", None)))):
                    group = self.cgroup_root / controller / name
                    if not group.parent.is_dir():
                        continue
                    group.mkdir(exist_ok=True)
                    made.append(str(group))
                    for knob, value in settings:
                        if value is None:  # cpuset.mems: the parent's memory nodes
                            value = (group.parent / knob).read_text().strip()
                        (group / knob).write_text(value)
                    if (group / "memory.memsw.limit_in_bytes").exists():  # swap accounting on: no swap either
                        (group / "memory.memsw.limit_in_bytes").write_text(str(limits.memory_bytes))
        except OSError as exc:
            log.warning("lease %s: cgroup limits incomplete (%s); CPU affinity and disk size still apply",
                        lease_id, exc)
        return made

    @staticmethod
    def _enter_config(sandbox_pid: int, gpus: list[int], limits: Limits, cgroups: list[str], directory: Path,
                      image: Path | None) -> dict:
        """What lease_enter needs: the sandbox, the limits, the renter's uid and its whole
        environment (an allowlist, nothing inherited)."""
        path = ENV_PATH if image is not None else f"{Path(sys.executable).parent}:{ENV_PATH}"
        env = {"HOME": SANDBOX_HOME, "USER": "renter", "LOGNAME": "renter", "PATH": path, "LANG": "C.UTF-8",
               "CUDA_VISIBLE_DEVICES": cuda_visible_devices(gpus), "UNCHAINED_LEASE_GPUS": str(len(gpus)),
               "OMP_NUM_THREADS": str(len(limits.cpus))}
        return {"pid": sandbox_pid, "cgroups": cgroups, "cpus": list(limits.cpus), "uid": SANDBOX_UID,
                "home": SANDBOX_HOME, "seccomp": str(directory / "seccomp.bpf"), "env": env}

    def _sshd_config(self, directory: Path, port: int, user: str) -> str:
        return "\n".join([
            f"Port {port}", f"ListenAddress {self.listen_host}", f"HostKey {directory / 'host_key'}",
            f"PidFile {directory / 'sshd.pid.d'}", f"AuthorizedKeysFile {directory / 'authorized_keys'}",
            f"AllowUsers {user}", f"ForceCommand {directory / 'enter.sh'}",
            "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password", "UsePAM no", "AllowTcpForwarding no", "AllowAgentForwarding no",
            "AllowStreamLocalForwarding no", "X11Forwarding no", "PermitTunnel no", "PermitUserRC no",
            "PermitUserEnvironment no", "ClientAliveInterval 15", "ClientAliveCountMax 2", "MaxStartups 10:30:60",
            # The key file is ours, 0600 in a 0700 directory; StrictModes would also refuse a data
            # directory below a sticky world-writable one such as /tmp.
            "StrictModes no", "LogLevel INFO", ""])

    def _wait_listening(self, port: int, sshd: subprocess.Popen, directory: Path) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if sshd.poll() is not None:
                raise LeaseEnvError(f"sshd exited: {(directory / 'sshd.log').read_text().strip()[-500:]}")
            try:
                socket.create_connection((self.listen_host if self.listen_host != "0.0.0.0" else "127.0.0.1", port),
                                         timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise LeaseEnvError(f"sshd not listening on port {port} after {START_TIMEOUT_S:.0f} s")

    def stop(self, lease_id: int) -> bool:
        """Ends the environment: sessions closed, every process killed, files wiped. False when
        there was none (a repeated end is harmless)."""
        directory = self._dir(lease_id)
        if not directory.exists():
            return False
        state = self.state(lease_id)
        self._teardown(directory, state)
        log.info("lease %s: environment removed", lease_id)
        return True

    @staticmethod
    def _teardown(directory: Path, state: LeaseState | None) -> None:
        pids = {name: int((directory / f"{name}.pid").read_text())
                for name in ("sshd", "sandbox", "slirp", "bwrap") if (directory / f"{name}.pid").exists()}
        if "sshd" in pids:  # the listener and every session it forked
            for pid in [pids["sshd"], *_descendants(pids["sshd"])]:
                _kill(pid)
        for name in ("slirp", "sandbox", "bwrap"):  # pid 1 of the namespace: the kernel kills everything inside
            if name in pids:
                _kill(pids[name])
        for name in ("sandbox", "bwrap"):
            deadline = time.monotonic() + 5
            while name in pids and is_alive(pids[name]) and time.monotonic() < deadline:
                time.sleep(0.02)
        cgroups = state.cgroups if state else (json.loads((directory / "cgroups.json").read_text())
                                               if (directory / "cgroups.json").exists() else [])
        for cgroup in cgroups:
            group = Path(cgroup)
            deadline = time.monotonic() + 5
            while group.exists() and time.monotonic() < deadline:
                for line in (group / "cgroup.procs").read_text().split():
                    _kill(int(line))
                try:
                    group.rmdir()
                except OSError:
                    time.sleep(0.05)
        shutil.rmtree(directory, ignore_errors=True)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def is_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not reaped yet, does not count)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


__all__ = ["BLOCKED_RANGES", "LeaseEnvError", "LeaseEnvironments", "LeaseImageRefused", "LeaseState", "Limits",
           "cuda_visible_devices", "gpu_device_nodes", "is_alive", "lease_uid", "limits_for", "pick_gpus"]
