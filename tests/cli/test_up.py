"""`unchained up`: a local network that stays up (chain with a block time, contracts, broker,
backend), prints what to run next, writes its config file, and SIGTERM stops every process. A
service that crashes is started again on the same port and data; a new `up` on the same data
directory goes on with the same chain (`--fresh` starts a new one)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import psutil
import pytest
import redis
from web3 import Web3

from tests.support.waiting import wait_until
from client.ports import free_port
from devtools.market import wait_for
from unchained_cli.chain import LocalChain

UNCHAINED = str(Path(sys.executable).with_name("unchained"))
REPO = Path(__file__).resolve().parents[2]


def _env(home: Path, columns: int) -> dict[str, str]:
    # This checkout's code, also where the venv's `unchained` is installed from another one.
    return {**os.environ, "HOME": str(home), "COLUMNS": str(columns), "PYTHONPATH": str(REPO)}


def test_up_serves_a_network_with_a_block_time_and_sigterm_stops_everything(tmp_path: Path) -> None:
    rpc_port, backend_port = free_port(), free_port()
    log = tmp_path / "up.out"
    with open(log, "wb") as out:
        up = subprocess.Popen([UNCHAINED, "up", "--port", str(rpc_port), "--backend-port", str(backend_port),
                               "--data-dir", str(tmp_path / "net")], stdout=out, stderr=subprocess.STDOUT,
                              env=_env(tmp_path, 200))
    try:
        assert wait_for(lambda: "In every other terminal" in log.read_text() or up.poll() is not None, 240, 0.5)
        text = log.read_text()
        assert up.poll() is None, text
        config = tomllib.loads((tmp_path / "net" / "config.toml").read_text())
        assert config["rpc"] == f"http://127.0.0.1:{rpc_port}" and config["backend"] == f"http://127.0.0.1:{backend_port}"
        assert f"export UNCHAINED_CONFIG={tmp_path / 'net' / 'config.toml'}" in text
        if shutil.which("redis-server"):  # up's own Redis: the parties connect as their own users
            assert not isinstance(config["broker"], str), "the admin URL would reach every party"
            assert config["provider run"]["broker"].startswith("redis://provider-0x70997970")
            assert config["verifier run"]["broker"].startswith("redis://verifier-0x3c44cddd")
            assert config["broker"]["admin_url"].startswith("redis://127.0.0.1:")
            provider = redis.Redis.from_url(config["provider run"]["broker"])
            with pytest.raises(redis.exceptions.NoPermissionError):
                provider.keys("*")
        assert "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" in text  # funded accounts, whole
        assert "unchained provider run --keystore" in text and "unchained job submit" in text
        web3 = Web3(Web3.HTTPProvider(config["rpc"]))
        first = web3.eth.block_number
        assert wait_for(lambda: web3.eth.block_number > first, 15, 0.2), "no block without a transaction"
        assert httpx.get(f"{config['backend']}/health", timeout=10).status_code == 200
        assert (tmp_path / "net" / "example" / "model.pt").stat().st_size > 0
        assert len(list((tmp_path / "net" / "example" / "inputs").iterdir())) == 3
        children = psutil.Process(up.pid).children(recursive=True)
        names = " ".join(" ".join(c.cmdline()) for c in children)
        assert "anvil" in names and "backend serve" in names
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=60) == 0, log.read_text()[-2000:]
    finally:
        if up.poll() is None:
            up.kill()
    _gone, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, [" ".join(p.cmdline()) for p in alive]
    assert "stopping every process" in log.read_text()
    wait_until(lambda: not Web3(Web3.HTTPProvider(f"http://127.0.0.1:{rpc_port}")).is_connected(), 10,
               f"nothing answers on the chain's port {rpc_port} any more")


def _backend(up: subprocess.Popen) -> psutil.Process:
    return next(c for c in psutil.Process(up.pid).children(recursive=True) if "backend serve" in " ".join(c.cmdline()))


def test_up_starts_a_crashed_backend_again_on_the_same_chain_and_broker_three_times(tmp_path: Path) -> None:
    rpc_port, backend_port = free_port(), free_port()
    log = tmp_path / "up.out"
    with open(log, "wb") as out:
        up = subprocess.Popen([UNCHAINED, "up", "--port", str(rpc_port), "--backend-port", str(backend_port),
                               "--data-dir", str(tmp_path / "net")], stdout=out, stderr=subprocess.STDOUT,
                              env=_env(tmp_path, 400))
    try:
        assert wait_for(lambda: "In every other terminal" in log.read_text() or up.poll() is not None, 240, 0.5)
        assert up.poll() is None, log.read_text()
        config = tomllib.loads((tmp_path / "net" / "config.toml").read_text())
        web3 = Web3(Web3.HTTPProvider(config["rpc"]))
        escrow = json.loads(Path(config["deployment"]).read_text())["contracts"]["JobEscrow"]["address"]
        chain_and_broker = [c for c in psutil.Process(up.pid).children(recursive=True)
                            if "backend serve" not in " ".join(c.cmdline())]
        block = web3.eth.block_number

        def served_again() -> bool:
            assert up.poll() is None, log.read_text()
            try:
                return httpx.get(f"{config['backend']}/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        for restart in (1, 2, 3):
            _backend(up).kill()  # a crash: SIGKILL, nothing of its own runs on the way out
            wait_until(served_again, 120, "the backend answers again")
            said = wait_until(lambda: log.read_text().count(" again\n") == restart and log.read_text(), 30,
                              "up says the backend is back")
            assert (f"the backend exited (status -9); starting it again ({restart} of 3 restarts within 10 min), "
                    "on the same chain and broker") in said, said
            assert all(c.is_running() for c in chain_and_broker), "the chain or the broker was stopped"
            assert web3.eth.block_number >= block and web3.eth.get_code(escrow), "not the same chain"

        _backend(up).kill()  # a fourth crash within the window: a cause a restart does not fix
        assert up.wait(timeout=60) == 1, log.read_text()[-2000:]
        assert "error: the backend exited 4 times within 10 min (last exit status -9), so `up` stops" in log.read_text()
    finally:
        if up.poll() is None:
            up.kill()


def _up(tmp_path: Path, rpc_port: int, backend_port: int, *flags: str, name: str = "up") -> tuple[subprocess.Popen, Path]:
    """`unchained up` on tmp_path/net, once it says what to run next (or exited)."""
    log = tmp_path / f"{name}.out"
    with open(log, "wb") as out:
        up = subprocess.Popen([UNCHAINED, "up", "--port", str(rpc_port), "--backend-port", str(backend_port),
                               "--data-dir", str(tmp_path / "net"), *flags], stdout=out, stderr=subprocess.STDOUT,
                              env=_env(tmp_path, 400))
    assert wait_for(lambda: "In every other terminal" in log.read_text() or up.poll() is not None, 240, 0.5)
    return up, log


def _child(up: subprocess.Popen, word: str) -> psutil.Process:
    return next(c for c in psutil.Process(up.pid).children(recursive=True) if word in " ".join(c.cmdline()))


def _kept_block(net: Path) -> int:
    """The latest block in the state anvil last wrote (every 2 s)."""
    try:
        return int(json.loads((net / "chain" / "state.json").read_text())["best_block_number"])
    except (OSError, ValueError, KeyError):
        return -1


def _said(log: Path, line: str, timeout: float = 120) -> str:
    return wait_until(lambda: line in log.read_text() and log.read_text(), timeout, f"up says {line!r}")


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_up_starts_a_crashed_broker_and_anvil_again_with_their_data(tmp_path: Path) -> None:
    up, log = _up(tmp_path, free_port(), free_port())
    try:
        assert up.poll() is None, log.read_text()
        config = tomllib.loads((tmp_path / "net" / "config.toml").read_text())
        admin = redis.Redis.from_url(config["broker"]["admin_url"])
        admin.rpush("a-queued-task", b"task")
        _child(up, "redis-server").kill()
        said = _said(log, f"the broker at {config['broker']['admin_url']} again")
        assert "the broker exited (status -9); starting it again (1 of 3 restarts within 10 min), on the same port, " \
               "users and data" in said, said
        assert admin.lrange("a-queued-task", 0, -1) == [b"task"], "the queued task was lost"
        provider = redis.Redis.from_url(config["provider run"]["broker"])
        assert provider.ping(), "the party's user was lost"  # signs in as that user

        web3 = Web3(Web3.HTTPProvider(config["rpc"]))
        escrow = json.loads(Path(config["deployment"]).read_text())["contracts"]["JobEscrow"]["address"]
        web3.provider.make_request("evm_increaseTime", [7 * 24 * 3600])  # chain time ahead of the clock
        web3.provider.make_request("evm_mine", [])
        before = web3.eth.get_block("latest")
        wait_until(lambda: _kept_block(tmp_path / "net") >= before.number, 15, "anvil keeps the latest block")
        _child(up, "anvil").kill()
        said = _said(log, f"anvil at {config['rpc']} again")
        assert "anvil exited (status -9); starting it again (1 of 3 restarts within 10 min), from the chain kept in" \
               in said, said
        after = web3.eth.get_block("latest")
        assert after.number >= before.number and web3.eth.get_code(escrow), "not the same chain"
        wait_until(lambda: web3.eth.block_number > after.number, 15, "anvil mines again")
        assert web3.eth.get_block("latest").timestamp > before.timestamp, "the chain's time went back"
        assert httpx.get(f"{config['backend']}/health", timeout=10).status_code == 200
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=60) == 0, log.read_text()[-2000:]
    finally:
        if up.poll() is None:
            up.kill()


def test_a_new_up_on_the_data_dir_goes_on_with_the_same_chain_and_fresh_starts_a_new_one(tmp_path: Path) -> None:
    rpc_port, backend_port = free_port(), free_port()
    net = tmp_path / "net"
    up, log = _up(tmp_path, rpc_port, backend_port)
    try:
        assert up.poll() is None, log.read_text()
        config = tomllib.loads((net / "config.toml").read_text())
        deployment = Path(config["deployment"]).read_text()
        web3 = Web3(Web3.HTTPProvider(config["rpc"]))
        web3.provider.make_request("evm_increaseTime", [7 * 24 * 3600])
        web3.provider.make_request("evm_mine", [])
        before = web3.eth.get_block("latest")
        database = sorted(p.name for p in (net / "backend").iterdir())
        second = subprocess.run([UNCHAINED, "up", "--port", str(free_port()), "--backend-port", str(free_port()),
                                 "--data-dir", str(net), "--fresh"], capture_output=True, text=True, timeout=120,
                                env=_env(tmp_path, 400))
        assert second.returncode == 1 and second.stderr.strip() == (
            f"error: another unchained up is running on {net} (pid {up.pid}): stop it first, or pass another "
            "--data-dir"), second.stdout + second.stderr
        up.send_signal(signal.SIGTERM)  # Ctrl-C: anvil writes its state as it exits
        assert up.wait(timeout=60) == 0, log.read_text()[-2000:]
    finally:
        if up.poll() is None:
            up.kill()

    up, log = _up(tmp_path, rpc_port, backend_port, name="again")
    try:
        text = log.read_text()
        assert up.poll() is None, text
        assert f"the chain kept in {net / 'chain' / 'state.json'} goes on at block " in text, text
        assert "contracts deployed" not in text, "deployed again"
        assert Path(config["deployment"]).read_text() == deployment
        # The same broker port and party users: the agents' config.toml still holds.
        assert tomllib.loads((net / "config.toml").read_text()) == config
        assert redis.Redis.from_url(config["provider run"]["broker"]).ping()
        escrow = json.loads(deployment)["contracts"]["JobEscrow"]["address"]
        assert web3.eth.get_code(escrow), "no contract at the deployment's address"
        assert web3.eth.get_block(before.number).hash == before.hash, "another chain"
        wait_until(lambda: web3.eth.block_number > before.number, 15, "anvil mines again")
        assert web3.eth.get_block("latest").timestamp > before.timestamp, "the chain's time went back"
        assert database == sorted(p.name for p in (net / "backend").iterdir())
        assert httpx.get(f"{config['backend']}/health", timeout=10).status_code == 200
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=60) == 0, log.read_text()[-2000:]
    finally:
        if up.poll() is None:
            up.kill()

    (net / "chain" / "state.json").write_text("{not a chain")
    refused = subprocess.run([UNCHAINED, "up", "--port", str(rpc_port), "--backend-port", str(backend_port),
                              "--data-dir", str(net)], capture_output=True, text=True, timeout=120,
                             env=_env(tmp_path, 400))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    error = refused.stderr.strip()
    assert error.startswith(f"error: anvil could not load the chain kept in {net / 'chain' / 'state.json'}: ") \
        and error.endswith("; `unchained up --fresh` starts a new chain (a new deployment, backend database and "
                           "broker data)") and len(error.splitlines()) == 1, error

    (net / "chain" / "state.json").unlink()
    with LocalChain(port=free_port(), state=net / "chain" / "state.json"):  # a chain without the contracts
        pass
    refused = subprocess.run([UNCHAINED, "up", "--port", str(rpc_port), "--backend-port", str(backend_port),
                              "--data-dir", str(net)], capture_output=True, text=True, timeout=120,
                             env=_env(tmp_path, 400))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    error = refused.stderr.strip()
    assert error.startswith(f"error: the chain kept in {net / 'chain' / 'state.json'} holds no code at the "
                            "addresses of ") and f" in {config['deployment']}; `unchained up --fresh` starts" in error \
        and len(error.splitlines()) == 1, error

    up, log = _up(tmp_path, rpc_port, backend_port, "--fresh", name="fresh")
    try:
        text = log.read_text()
        assert up.poll() is None, text
        assert f"removed {net / 'chain'}" in text and "contracts deployed" in text, text
        assert web3.eth.get_block("latest").timestamp < before.timestamp, "not a new chain (its time is a week ahead)"
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=60) == 0, log.read_text()[-2000:]
    finally:
        if up.poll() is None:
            up.kill()
