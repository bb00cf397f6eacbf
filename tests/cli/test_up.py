"""`unchained up`: a local network that stays up (chain with a block time, contracts, broker,
backend), prints what to run next, writes its config file, and SIGTERM stops every process."""

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

UNCHAINED = str(Path(sys.executable).with_name("unchained"))


def test_up_serves_a_network_with_a_block_time_and_sigterm_stops_everything(tmp_path: Path) -> None:
    rpc_port, backend_port = free_port(), free_port()
    log = tmp_path / "up.out"
    with open(log, "wb") as out:
        up = subprocess.Popen([UNCHAINED, "up", "--port", str(rpc_port), "--backend-port", str(backend_port),
                               "--data-dir", str(tmp_path / "net")], stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, "HOME": str(tmp_path), "COLUMNS": "200"})
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
                              env={**os.environ, "HOME": str(tmp_path), "COLUMNS": "400"})
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
