"""`unchained chain up`: anvil starts, the RPC URL and funded accounts are printed, Ctrl-C stops it."""

import signal
import subprocess
import sys
import time
from pathlib import Path

from web3 import Web3

from unchained_cli.chain import free_port

UNCHAINED = str(Path(sys.executable).with_name("unchained"))


def test_chain_up_prints_rpc_and_accounts_and_stops_on_interrupt():
    port = free_port()
    proc = subprocess.Popen([UNCHAINED, "chain", "up", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={"COLUMNS": "200", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"})
    try:
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "10,000" in line:
                break
        output = "".join(lines)
        assert f"RPC URL: http://127.0.0.1:{port}" in output
        web3 = Web3(Web3.HTTPProvider(f"http://127.0.0.1:{port}"))
        assert web3.eth.chain_id == 31337
        assert web3.eth.accounts[0] in output
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
    assert not Web3(Web3.HTTPProvider(f"http://127.0.0.1:{port}")).is_connected()
