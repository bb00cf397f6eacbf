"""`provider run` refuses to start next to another agent: one running on its data directory (a
flock the kernel frees when the holder dies, so a crashed agent never blocks the restart), or a
program on its metrics port. Real processes: the holder is an agent waiting at its password
prompt, as one left in another terminal would."""

from __future__ import annotations

import os
import pty
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

from client.keystore import PASSWORD_FILE_ENV
from client.ports import free_port
from unchained_cli.chain import REPO_ROOT as REPO


def _args(keystore: Path, data_dir: Path, port: int, broker: str) -> list[str]:
    # No node is asked anything before the key is open: the RPC URL may point nowhere.
    return [sys.executable, "-m", "unchained_cli.main", "provider", "run", "--rpc", "http://127.0.0.1:1",
            "--keystore", str(keystore), "--broker", broker, "--content-dir", str(data_dir / "content"),
            "--data-dir", str(data_dir), "--metrics-port", str(port)]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), PASSWORD_FILE_ENV: ""}


def _at_prompt(args: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """`provider run` on a pseudo-terminal, once it asks for the keystore's password (it has
    taken its data directory and port by then), and the terminal's master side (open: closing it
    hangs the process up)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=_env(), cwd=REPO)
    os.close(slave)
    seen = b""
    try:
        while b"password for keystore" not in seen:
            ready, _, _ = select.select([master], [], [], 120)
            assert ready and proc.poll() is None, f"no password prompt within 120 s: {seen!r}"
            seen += os.read(master, 4096)
    except BaseException:
        proc.kill()
        os.close(master)
        raise
    return proc, master


def _refused(args: list[str]) -> str:
    done = subprocess.run(args, capture_output=True, text=True, env=_env(), cwd=REPO, timeout=120)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr  # one line, no traceback
    return done.stderr.strip()


def test_second_agent_on_a_data_dir_is_refused_until_the_first_dies(keystore, tmp_path):
    broker = f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}"
    data_dir = tmp_path / "provider"
    first, terminal = _at_prompt(_args(keystore, data_dir, free_port(), broker))
    try:
        said = _refused(_args(keystore, data_dir, free_port(), broker))
        assert said == (f"error: another provider agent is running on {data_dir} (pid {first.pid}): "
                        "stop it first, or pass another --data-dir"), said
    finally:
        first.send_signal(signal.SIGKILL)  # a crash: nothing of its own runs on the way out
        first.wait()
        os.close(terminal)
    # The kernel freed the lock with the process: a restart goes past it, to the password prompt.
    restarted, terminal = _at_prompt(_args(keystore, data_dir, free_port(), broker))
    restarted.kill()
    restarted.wait()
    os.close(terminal)


def test_a_taken_metrics_port_is_named_with_the_option_to_change_it(keystore, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said = _refused(_args(keystore, tmp_path / "provider", port, f"sqla+sqlite:///{tmp_path / 'b.sqlite'}"))
    assert said == (f"error: metrics port {port} on 127.0.0.1 is already in use (another agent?): "
                    "pass --metrics-port with a free port (0 picks one)"), said
