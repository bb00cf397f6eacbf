"""A lease's machine: an isolated environment the renter reaches over SSH, wiped at the end.

Each lease gets
- one long-lived bubblewrap sandbox (Linux namespaces: mount, pid, network, ipc, uts, user,
  cgroup) whose processes hold no capabilities and no new privileges: a read-only view of the
  system (/usr, a few /etc files, never /etc/shadow or its SSH host keys) and of this
  Python installation (so `unchained pog run` works inside), a size-limited tmpfs home, only the
  leased GPUs' device nodes and CUDA_VISIBLE_DEVICES naming them, and no network interface but
  loopback, so the agent's broker, database and RPC node cannot be reached. The agent's data
  directory (keystore, job work, other leases) is simply not in its mount namespace;
- its own OpenSSH sshd (Debian's), run with its own config on a free high port, its own host key,
  an AuthorizedKeysFile holding only the lease's key (with `restrict`), and a ForceCommand that
  enters the sandbox's namespaces (nsenter) as the sandbox user, in the lease's cgroups and CPUs;
- CPU, memory and disk in proportion to the GPUs leased (`limits_for`): a CPU affinity set, cgroup
  memory and pid limits where a writable cgroup hierarchy exists, and the tmpfs size.

`stop` kills the sshd and every session it spawned, then the sandbox's pid 1, which takes every
process inside with it (the kernel kills a pid namespace with its init); the tmpfs dies with its
mount namespace, and the lease's directory (host key, authorized key) is removed, so the key no
longer opens anything. State lives in the lease's directory (`state.json`), not in memory:
Celery's prefork children that start and end a lease are different processes.

Podman or Docker would give the same guarantees with an image the renter chooses; that backend is
not written yet, so every lease uses bubblewrap, which needs no daemon.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from protocol.lease_access import LeaseAccess, normalize_ssh_key
from client.ports import free_port
from provider_agent import ProviderAgentError

log = logging.getLogger(__name__)

SANDBOX_UID = 1000  # the renter's uid inside the sandbox's user namespace
SANDBOX_HOME = "/home/renter"
GPU_CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
PACKAGES = ("protocol", "client", "provider_agent", "backend", "verifier", "unchained_cli")
START_TIMEOUT_S = 15.0
# /etc entries a shell, Python and CUDA need; the rest of /etc (shadow, SSH host keys) stays out.
ETC_FILES = ("passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
             "alternatives", "ssl", "ca-certificates", "bash.bashrc", "profile", "profile.d", "inputrc", "terminfo",
             "mime.types", "os-release")


class LeaseEnvError(ProviderAgentError):
    """A lease environment could not be created or removed; the message says what is missing."""


@dataclass(frozen=True)
class Limits:
    cpus: tuple[int, ...]  # CPU ids the lease's processes may run on
    memory_bytes: int
    disk_bytes: int  # size of the home tmpfs
    pids: int


def limits_for(gpus: int, total_gpus: int, cpus: list[int], memory_bytes: int, disk_bytes: int) -> Limits:
    """The lease's share of the machine: gpus/total_gpus of its CPUs (at least one), memory and disk."""
    if not 0 < gpus <= max(total_gpus, gpus):
        raise LeaseEnvError(f"{gpus} GPU(s) leased of {total_gpus}")
    share = gpus / max(total_gpus, gpus)
    count = max(1, int(len(cpus) * share))
    return Limits(tuple(sorted(cpus)[:count]), max(256 << 20, int(memory_bytes * share)),
                  max(64 << 20, int(disk_bytes * share)), max(256, int(4096 * share)))


def pick_gpus(total: int, taken: set[int], count: int) -> list[int]:
    """The first `count` GPU indices of `total` that no other lease holds."""
    free = [i for i in range(total) if i not in taken]
    if len(free) < count:
        raise LeaseEnvError(f"{count} GPU(s) wanted, {len(free)} free of {total}")
    return free[:count]


def gpu_device_nodes(dev_dir: Path, gpu_indices: list[int]) -> list[Path]:
    """The device nodes a sandbox needs for exactly these GPUs: /dev/nvidia<i> for each leased
    index and the shared control nodes, among those that exist (none on a machine without GPUs)."""
    wanted = [f"nvidia{i}" for i in gpu_indices] + list(GPU_CONTROL_NODES)
    return [dev_dir / name for name in wanted if (dev_dir / name).exists()]


def cuda_visible_devices(gpu_indices: list[int]) -> str:
    return ",".join(str(i) for i in gpu_indices)


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


def _python_binds() -> list[str]:
    """This interpreter, its environment and the unchained packages, read-only at the same paths:
    the renter can run `unchained pog run` inside. Only the package directories are bound, never
    the directory around them (which may hold the agent's files)."""
    args: list[str] = []
    for prefix in sorted({sys.base_prefix, sys.prefix}):
        if not prefix.startswith("/usr/") and prefix != "/usr":
            args += ["--ro-bind", prefix, prefix]
    for name in PACKAGES:
        module = sys.modules.get(name) or __import__(name)
        package_dir = str(Path(module.__file__).resolve().parent)
        if not package_dir.startswith(sys.prefix):
            args += ["--ro-bind", package_dir, package_dir]
    return args


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

    def access(self) -> LeaseAccess:
        return LeaseAccess(self.lease_id, self.host, self.port, self.user, self.host_key_fingerprint)


class LeaseEnvironments:
    """Creates and removes lease environments under `root` (0700, inside the agent's data dir)."""

    def __init__(self, root: Path, total_gpus: int, public_host: str, listen_host: str = "0.0.0.0",
                 memory_bytes: int | None = None, disk_bytes: int = 8 << 30, dev_dir: Path = Path("/dev"),
                 cgroup_root: Path = Path("/sys/fs/cgroup")) -> None:
        self.root = root
        self.total_gpus = total_gpus
        self.public_host = public_host
        self.listen_host = listen_host
        self.memory_bytes = memory_bytes or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        self.disk_bytes = disk_bytes
        self.dev_dir = dev_dir
        self.cgroup_root = cgroup_root

    @staticmethod
    def check_tools() -> None:
        missing = [tool for tool in ("bwrap", "sshd", "ssh-keygen", "nsenter", "setpriv", "taskset")
                   if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()]
        if missing:
            raise LeaseEnvError(f"missing {', '.join(missing)}: apt-get install bubblewrap openssh-server "
                                "openssh-client util-linux")

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

    def start(self, lease_id: int, gpu_count: int, ssh_public_key: str) -> LeaseState:
        """Creates the environment (idempotent: an existing one is returned as it is)."""
        self.check_tools()
        key = normalize_ssh_key(ssh_public_key)
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
                state = self._create(lease_id, directory, gpus, gpu_count, key)
            except BaseException:
                self._teardown(directory, None)
                raise
            (directory / "state.json").write_text(json.dumps(asdict(state)))
        log.info("lease %s: environment up, GPUs %s, sshd on %s:%s", lease_id, gpus, self.public_host, state.port)
        return state

    def _create(self, lease_id: int, directory: Path, gpus: list[int], gpu_count: int, key: str) -> LeaseState:
        limits = limits_for(gpu_count, max(self.total_gpus, gpu_count), sorted(os.sched_getaffinity(0)),
                            self.memory_bytes, self.disk_bytes)
        cgroups = self._make_cgroups(lease_id, limits)
        sandbox_pid = self._start_sandbox(directory, gpus, limits, cgroups)
        (directory / "sandbox.pid").write_text(str(sandbox_pid))
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"unchained-lease-{lease_id}",
                        "-f", str(directory / "host_key")], check=True, capture_output=True)
        fingerprint = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(directory / "host_key.pub")],
                                     check=True, capture_output=True, text=True).stdout.split()[1]
        # `restrict`: no forwarding, no agent, no X11, no ~/.ssh/rc, even if the config allowed them.
        (directory / "authorized_keys").write_text(f"restrict,pty {key}\n")
        os.chmod(directory / "authorized_keys", 0o600)
        enter = directory / "enter.sh"
        enter.write_text(self._enter_script(sandbox_pid, gpus, limits, cgroups))
        os.chmod(enter, 0o700)
        port = free_port(self.listen_host)
        user = pwd.getpwuid(os.getuid()).pw_name
        (directory / "sshd_config").write_text(self._sshd_config(directory, port, user))
        if os.getuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        with open(directory / "sshd.log", "ab") as errors:
            sshd = subprocess.Popen([shutil.which("sshd") or "/usr/sbin/sshd", "-D", "-e", "-f",
                                     str(directory / "sshd_config")], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True)
        (directory / "sshd.pid").write_text(str(sshd.pid))
        self._wait_listening(port, sshd, directory)
        return LeaseState(lease_id, gpus, port, self.public_host, user, fingerprint, sandbox_pid, sshd.pid, cgroups)

    def _start_sandbox(self, directory: Path, gpus: list[int], limits: Limits, cgroups: list[str]) -> int:
        read_end, write_end = os.pipe()  # bwrap writes the sandbox's pid (JSON) here
        devices: list[str] = []
        for node in gpu_device_nodes(self.dev_dir, gpus):
            devices += ["--dev-bind", str(node), f"/dev/{node.name}"]
        argv = ["bwrap", "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
                "--new-session", "--hostname", "lease", *_system_binds(),
                "--dev", "/dev", *devices, "--proc", "/proc", "--tmpfs", "/tmp",
                # After /tmp's tmpfs, which would hide an environment installed under /tmp.
                *_python_binds(),
                "--size", str(limits.disk_bytes), "--tmpfs", SANDBOX_HOME, "--chdir", SANDBOX_HOME,
                "--info-fd", str(write_end), "--", "sleep", "infinity"]
        with open(directory / "sandbox.log", "ab") as errors:
            proc = subprocess.Popen(argv, pass_fds=(write_end,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=errors, start_new_session=True,
                                    preexec_fn=lambda: os.sched_setaffinity(0, limits.cpus))
        os.close(write_end)
        with os.fdopen(read_end) as info:
            text = info.read()  # bwrap closes its end once the sandbox runs (or on failure)
        if not text:
            proc.wait(timeout=START_TIMEOUT_S)
            raise LeaseEnvError(f"bubblewrap failed: {(directory / 'sandbox.log').read_text().strip()[-500:]}")
        pid = int(json.loads(text)["child-pid"])
        for cgroup in cgroups:
            Path(cgroup, "cgroup.procs").write_text(str(pid))
        return pid

    def _make_cgroups(self, lease_id: int, limits: Limits) -> list[str]:
        """Memory and pid limits in a cgroup per lease where the hierarchy is writable (cgroup v2,
        else v1's memory and pids controllers); none, with a warning, where it is not."""
        name = f"unchained-lease-{lease_id}"
        made: list[str] = []
        try:
            if (self.cgroup_root / "cgroup.controllers").exists():
                group = self.cgroup_root / name
                group.mkdir(exist_ok=True)
                (group / "memory.max").write_text(str(limits.memory_bytes))
                (group / "pids.max").write_text(str(limits.pids))
                made.append(str(group))
            else:
                for controller, knob, value in (("memory", "memory.limit_in_bytes", limits.memory_bytes),
                                                ("pids", "pids.max", limits.pids)):
                    group = self.cgroup_root / controller / name
                    if not group.parent.is_dir():
                        continue
                    group.mkdir(exist_ok=True)
                    made.append(str(group))
                    (group / knob).write_text(str(value))
        except OSError as exc:
            log.warning("lease %s: no cgroup limits (%s); CPU affinity and disk size still apply", lease_id, exc)
        return made

    @staticmethod
    def _enter_script(sandbox_pid: int, gpus: list[int], limits: Limits, cgroups: list[str]) -> str:
        """sshd's ForceCommand: join the lease's cgroups and CPUs, enter its namespaces as the
        sandbox user with no new privileges and a clean environment, run the command or a shell."""
        joins = "".join(f"echo $$ > {shlex.quote(c)}/cgroup.procs\n" for c in cgroups)
        path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
        env = {"HOME": SANDBOX_HOME, "USER": "renter", "PATH": path, "TERM": "${TERM:-xterm}",
               "CUDA_VISIBLE_DEVICES": cuda_visible_devices(gpus), "UNCHAINED_LEASE_GPUS": str(len(gpus)),
               "OMP_NUM_THREADS": str(len(limits.cpus))}
        assignments = " ".join(f'{k}="{v}"' for k, v in env.items())
        cpus = ",".join(str(c) for c in limits.cpus)
        return (f"#!/bin/sh\n# ForceCommand of this lease's sshd (written by provider_agent.lease_env)\n{joins}"
                f"exec taskset -c {cpus} nsenter -t {sandbox_pid} --all -S {SANDBOX_UID} -G {SANDBOX_UID} -- "
                f"setpriv --no-new-privs env -i {assignments} SSH_ORIGINAL_COMMAND=\"$SSH_ORIGINAL_COMMAND\" "
                f"/bin/bash -c 'cd; if [ -n \"$SSH_ORIGINAL_COMMAND\" ]; then exec /bin/bash -c \"$SSH_ORIGINAL_COMMAND\"; "
                f"else exec /bin/bash -l; fi'\n")

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
                for name in ("sshd", "sandbox") if (directory / f"{name}.pid").exists()}
        if "sshd" in pids:  # the listener and every session it forked
            for pid in [pids["sshd"], *_descendants(pids["sshd"])]:
                _kill(pid)
        if "sandbox" in pids:
            _kill(pids["sandbox"])  # pid 1 of the namespace: the kernel kills everything inside
            deadline = time.monotonic() + 5
            while is_alive(pids["sandbox"]) and time.monotonic() < deadline:
                time.sleep(0.02)
        for cgroup in state.cgroups if state else []:
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


__all__ = ["LeaseEnvError", "LeaseEnvironments", "LeaseState", "Limits", "cuda_visible_devices",
           "gpu_device_nodes", "is_alive", "limits_for", "pick_gpus"]
