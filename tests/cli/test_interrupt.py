"""Ctrl-C while a command is still starting ends with the one line "interrupted" and exit status
130, never a traceback: while Python imports the CLI, while the command's module loads, and while
it connects. Real processes and a real SIGINT; the import cases send it from an import hook at
that import, so the signal lands where it is meant to on a machine of any speed."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import struct
import sys
import termios
import time
import tomllib

import pytest

from unchained_cli.chain import REPO_ROOT as REPO

# Sends this process SIGINT (what Ctrl-C sends) when the named module starts to load.
HOOK = """import os, signal, sys
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, CtrlC())
"""


def _console_script() -> str:
    """What pip writes for `unchained` from pyproject.toml's entry point (its bin/unchained)."""
    entry = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["unchained"]
    module, attribute = entry.split(":")
    return f"import sys\nfrom {module} import {attribute}\nsys.argv[0] = 'unchained'\nsys.exit({attribute}())\n"


def _interrupted(done: subprocess.CompletedProcess[str]) -> None:
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "interrupted\n"), done


@pytest.mark.parametrize("module, args", [
    ("typer", ["--help"]),  # the root's own imports, before any of the CLI's code runs
    ("provider_agent.cli", ["provider", "run", "--help"]),  # a command's module, loaded when named
])
def test_ctrl_c_while_importing_says_interrupted(module, args):
    code = HOOK.format(module=module) + _console_script()
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    _interrupted(done)


def test_ctrl_c_while_connecting_says_interrupted():
    with socket.socket() as silent:  # accepts the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/status"
        proc = subprocess.Popen([sys.executable, "-c", _console_script(), "provider", "status", "--url", url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            silent.settimeout(120)
            connection, _ = silent.accept()  # the command is waiting for the agent's answer now
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        connection.close()
    _interrupted(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))



@pytest.mark.parametrize("args", [["--help"], ["job", "submit", "--help"], ["offers", "--help"]])
def test_output_to_a_reader_that_left_ends_quietly(args):
    """`unchained ... | head -3`: once the reader is gone, the writer stops without a word, as
    coreutils do, never "error: unexpected BrokenPipeError". The pipe holds one page: the reader
    leaves while the command is blocked writing into it (the kernel says so in /proc), so that
    write fails half-way through the output, on a machine of any speed."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    try:
        proc = subprocess.Popen([sys.executable, "-c", _console_script(), *args], stdout=write_end,
                                stderr=subprocess.PIPE, text=True, cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"})
        os.close(write_end)
        deadline = time.monotonic() + 120
        while not (_unread(read_end) and _blocked_in_write(proc.pid)):
            assert proc.poll() is None, "the command's output fit in the pipe: nothing was tested"
            assert time.monotonic() < deadline, "the command never blocked writing its output"
            time.sleep(0.01)
    finally:
        os.close(read_end)
    _, stderr = proc.communicate(timeout=120)
    assert stderr == "", stderr
    assert proc.returncode == 1, proc.returncode  # as Rich and Click end on a broken pipe


def _blocked_in_write(pid: int) -> bool:
    with open(f"/proc/{pid}/syscall") as syscall:  # "1 ..." while in write(2) (x86_64's number)
        return syscall.read().split()[0] == "1"


def _unread(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
