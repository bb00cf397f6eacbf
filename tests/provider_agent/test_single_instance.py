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
from tests.support.waiting import wait_until
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


def _agent(market, keystore: Path, password_file: Path, redis_url: str, data_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), PASSWORD_FILE_ENV: str(password_file),
           "UNCHAINED_PROVIDER_DEPLOYMENTS_DIR": str(market.deployments_dir), "UNCHAINED_PROVIDER_MINING": "false",
           "UNCHAINED_PROVIDER_STAKE_WEI": str(2 * 10**18)}
    with open(log, "wb") as terminal:
        return subprocess.Popen(
            [sys.executable, "-m", "unchained_cli.main", "provider", "run", "--rpc", market.chain.rpc_url,
             "--keystore", str(keystore), "--broker", redis_url, "--content-dir", str(data_dir / "content"),
             "--data-dir", str(data_dir), "--metrics-port", str(free_port())],
            cwd=REPO, env=env, stdout=terminal, stderr=subprocess.STDOUT)


def test_a_second_agent_of_one_key_on_another_data_dir_is_refused_and_a_crashed_one_restarts(
        market, keystore, password_file, redis_url, tmp_path):
    first_dir, log = tmp_path / "first", tmp_path / "first.txt"
    first = _agent(market, keystore, password_file, redis_url, first_dir, log)
    try:
        wait_until(lambda: "celery@" in log.read_text() or first.poll() is not None, 180, "the first agent is ready")
        assert first.poll() is None, log.read_text()
        second = _agent(market, keystore, password_file, redis_url, tmp_path / "second", tmp_path / "second.txt")
        try:
            assert second.wait(timeout=120) == 1
        finally:
            if second.poll() is None:  # it started: the old code's answer
                second.kill()
                second.wait()
        said = (tmp_path / "second.txt").read_text().strip()
        queue = f"provider.{market.provider.lower()}"
        assert said.startswith(f"error: another agent consumes {queue} (host "), said
        assert f"data dir {first_dir.resolve()}, pid {first.pid}): two agents with one key would take the same jobs" in said
        assert len(said.splitlines()) == 1, said
    finally:
        first.send_signal(signal.SIGKILL)  # a crash: its claim is neither released nor renewed
        first.wait()
    # Restarted at once on its own data directory: it holds that directory's lock, so the claim is its own.
    restarted = _agent(market, keystore, password_file, redis_url, first_dir, tmp_path / "restarted.txt")
    try:
        wait_until(lambda: "celery@" in (tmp_path / "restarted.txt").read_text() or restarted.poll() is not None, 180,
                   "the restarted agent is ready")
        assert restarted.poll() is None, (tmp_path / "restarted.txt").read_text()
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.wait(timeout=30)
