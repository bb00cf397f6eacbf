"""An SSH session's way into its lease (sshd's ForceCommand: `python -I -S lease_enter.py CONFIG`;
standard library only, everything imported before it leaves the host's file system).

Run by sshd as root, it
- drops its supplementary groups (root's group must not follow it in), joins the lease's cgroups
  and CPUs;
- enters the sandbox's namespaces (ipc, uts, net, cgroup, pid, mount, then the user namespace
  last: the others belong to bubblewrap's outer user namespace, which it could not enter after)
  and its root directory;
- becomes the renter's user (an unprivileged host uid through the namespace's map), sets no new
  privileges and loads the lease's seccomp filter;
- forks (a new pid namespace takes children only) and runs the renter's command or login shell
  with the environment in the config and nothing of sshd's or the agent's.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
NAMESPACES = ("ipc", "uts", "net", "cgroup", "pid", "mnt")
_libc = ctypes.CDLL(None, use_errno=True)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def enter(config: dict) -> int:
    pid = int(config["pid"])
    program = open(config["seccomp"], "rb").read()
    os.setgroups([])
    for cgroup in config["cgroups"]:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
            procs.write(str(os.getpid()))
    os.sched_setaffinity(0, config["cpus"])
    root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    fds = {name: os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY) for name in (*NAMESPACES, "user")}
    for name in NAMESPACES:
        _check(_libc.setns(fds[name], 0), f"setns {name}")
    os.fchdir(root)
    os.chroot(".")
    _check(_libc.setns(fds["user"], 0), "setns user")
    for fd in (root, *fds.values()):
        os.close(fd)
    uid = int(config["uid"])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")
    env = dict(config["env"])
    env["TERM"] = os.environ.get("TERM", "xterm")
    command = os.environ.get("SSH_ORIGINAL_COMMAND", "")
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    argv = [shell, "-c", command] if command else [shell, "-l"]
    child = os.fork()
    if child == 0:
        try:
            os.chdir(config["home"])
        except OSError:
            os.chdir("/")
        os.execve(shell, argv, env)
    for number in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda signum, _frame: os.kill(child, signum))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            return 255
        except InterruptedError:
            continue
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def main() -> None:
    try:
        sys.exit(enter(json.load(open(sys.argv[1]))))
    except OSError as exc:
        print(f"lease: cannot enter the machine: {exc}", file=sys.stderr)
        sys.exit(255)


if __name__ == "__main__":
    main()
