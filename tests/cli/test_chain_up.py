"""`unchained chain up`: anvil starts with a block time (blocks come on their own, so the backend's
confirmations and PoG rounds progress), the RPC URL and funded accounts are printed, and Ctrl-C or
SIGTERM stops anvil with it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
from web3 import Web3

from client.ports import free_port
from unchained_cli.chain import LocalChain
from devtools.market import wait_for

UNCHAINED = str(Path(sys.executable).with_name("unchained"))


@contextmanager
def chain_up(*args: str) -> Iterator[tuple[subprocess.Popen, int, str]]:
    """`unchained chain up` on a free port, read until its account table is printed; yields the
    process, the port and what it printed. Whatever is left running is killed at the end."""
    port = free_port()
    proc = subprocess.Popen([UNCHAINED, "chain", "up", "--port", str(port), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={"COLUMNS": "200", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"})
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
            lines.append(line)
            if "10,000" in line:
                break
        yield proc, port, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def anvil_of(proc: subprocess.Popen) -> psutil.Process:
    [anvil] = [c for c in psutil.Process(proc.pid).children(recursive=True) if "anvil" in c.name()]
    return anvil


def test_chain_up_mines_blocks_on_its_own_by_default_and_sigterm_stops_anvil() -> None:
    with chain_up() as (proc, port, output):
        assert f"RPC URL: http://127.0.0.1:{port}" in output and "Blocks: every 1 s" in output, output
        web3 = Web3(Web3.HTTPProvider(f"http://127.0.0.1:{port}"))
        assert web3.eth.chain_id == 31337
        assert web3.eth.accounts[0] in output
        first = web3.eth.block_number
        # No transaction is sent: the backend's confirmations and a PoG round's seed block come anyway.
        assert wait_for(lambda: web3.eth.block_number >= first + 2, 30, 0.2), "no block came on its own"
        anvil = anvil_of(proc)
        proc.send_signal(signal.SIGTERM)  # as a service manager or `kill` stops it
        proc.wait(timeout=30)
        gone, alive = psutil.wait_procs([anvil], timeout=10)
        assert not alive, f"anvil {anvil.pid} outlived `chain up`"
    assert not Web3(Web3.HTTPProvider(f"http://127.0.0.1:{port}")).is_connected()


def test_chain_up_block_time_zero_mines_a_block_per_transaction_only_and_stops_on_interrupt() -> None:
    with chain_up("--block-time", "0") as (proc, port, output):
        assert "Blocks: one per transaction" in output, output
        web3 = Web3(Web3.HTTPProvider(f"http://127.0.0.1:{port}"))
        first = web3.eth.block_number
        accounts = web3.eth.accounts
        web3.eth.wait_for_transaction_receipt(
            web3.eth.send_transaction({"from": accounts[0], "to": accounts[1], "value": 1}), timeout=30)
        assert web3.eth.block_number == first + 1
        # With a block time, blocks would come meanwhile: none may.
        assert not wait_for(lambda: web3.eth.block_number > first + 1, 2.5, 0.2)
        anvil = anvil_of(proc)
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        proc.wait(timeout=30)
        gone, alive = psutil.wait_procs([anvil], timeout=10)
        assert not alive, f"anvil {anvil.pid} outlived `chain up`"
    assert not Web3(Web3.HTTPProvider(f"http://127.0.0.1:{port}")).is_connected()


def test_set_up_mined_at_once_then_blocks_come_on_their_own_again() -> None:
    with LocalChain(port=free_port(), block_time=1) as local:
        web3 = Web3(Web3.HTTPProvider(local.rpc_url))
        assert web3.provider.make_request("anvil_getAutomine", [])["result"] is False
        with local.mining_at_once():
            assert web3.provider.make_request("anvil_getAutomine", [])["result"] is True
            before = web3.eth.block_number
            accounts = web3.eth.accounts
            # Mined as it arrives, in a block of its own: no block of the interval comes between.
            # (anvil may answer the send a moment before its miner has the block: seen under load.)
            tx = web3.eth.send_transaction({"from": accounts[0], "to": accounts[1], "value": 1})
            assert web3.eth.wait_for_transaction_receipt(tx, timeout=30, poll_latency=0.05).blockNumber == before + 1
        assert web3.provider.make_request("anvil_getAutomine", [])["result"] is False
        head = web3.eth.block_number
        assert wait_for(lambda: web3.eth.block_number >= head + 2, 30, 0.2), "the block time did not come back"
