"""A local development chain: anvil from the npm package, started and stopped by us."""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from web3 import Web3
from web3.types import RPCEndpoint

from unchained_cli.errors import CliError

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
# Seconds per block for the chains that tests and the local market start (0 or unset: every
# transaction mined at once). With a block time, a transaction waits for the next block, as on a
# real chain: the end-to-end and fault tests run in both modes (scripts/test.sh).
BLOCK_TIME_ENV = "UNCHAINED_TEST_BLOCK_TIME"
NPM_ANVIL = REPO_ROOT / "node_modules" / "@foundry-rs" / "anvil-linux-amd64" / "bin" / "anvil"


class ChainError(CliError):
    """The local chain could not be started or reached."""


def anvil_binary() -> str:
    """anvil on PATH (the venv links it there), else the one inside node_modules."""
    found = shutil.which("anvil")
    if found:
        return found
    if NPM_ANVIL.exists():
        return str(NPM_ANVIL)
    raise ChainError("anvil not found: run scripts/setup.sh (it installs @foundry-rs/anvil from npm)")


def die_with_parent() -> None:
    """Runs in a child before exec: SIGTERM when the process that started it dies, however it
    dies (Linux PDEATHSIG), so no anvil outlives the test, demo or `chain up` that owned it.
    Linux ties this to the starting thread: start children from a thread that lives as long."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_on_sigterm() -> None:
    """SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, as Ctrl-C does, so the
    caller's `finally` stops what it started (by default they end Python without running it)."""
    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)


def block_time_from_env(default: float | None = None) -> float | None:
    """UNCHAINED_TEST_BLOCK_TIME as seconds per block: None (instant mining) when 0, `default`
    when unset."""
    raw = os.environ.get(BLOCK_TIME_ENV, "").strip()
    if not raw:
        return default
    try:
        seconds = float(raw)
    except ValueError as exc:
        raise ChainError(f"{BLOCK_TIME_ENV}={raw!r} is not a number of seconds") from exc
    if seconds < 0:
        raise ChainError(f"{BLOCK_TIME_ENV}={raw!r} is negative")
    return seconds or None


@dataclass
class LocalChain:
    """An anvil process; use as a context manager or call start()/stop()."""

    port: int = 8545
    block_time: float | None = None  # None: a block per transaction (automine)
    # With block_time: still mine each transaction at once, and an empty block every block_time
    # when idle (deadlines and block-hash randomness move on their own, transactions wait for nothing).
    mixed_mining: bool = False
    accounts: int = 10
    balance_eth: int = 10_000
    # A file the chain is kept in: loaded at start when it exists, written every `state_interval`
    # seconds and at exit (anvil --state), so a restart goes on with the same chain.
    state: Path | None = None
    state_interval: int = 2
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> "LocalChain":
        cmd = [
            anvil_binary(),
            "--port", str(self.port),
            "--accounts", str(self.accounts),
            "--balance", str(self.balance_eth),
            "--chain-id", "31337",
        ]
        if self.block_time:
            cmd += ["--block-time", str(self.block_time)]
            if self.mixed_mining:
                cmd.append("--mixed-mining")
        if self.state is not None:
            self.state.parent.mkdir(parents=True, exist_ok=True)
            cmd += ["--state", str(self.state), "--state-interval", str(self.state_interval)]
        self.process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        preexec_fn=die_with_parent)
        web3 = Web3(Web3.HTTPProvider(self.rpc_url))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                raise ChainError(f"anvil exited with {self.process.returncode}: {err.strip()}")
            try:
                web3.eth.block_number  # noqa: B018  the read is the check: does anvil answer?
            except Exception:  # connection refused until anvil listens
                time.sleep(0.05)
                continue
            if self.state is not None:
                _clock_from_latest_block(web3)
            log.info("anvil up at %s (pid %s)", self.rpc_url, self.process.pid)
            return self
        self.stop()
        raise ChainError(f"anvil did not answer on {self.rpc_url} within {timeout:.0f}s")

    @contextmanager
    def mining_at_once(self) -> Iterator[None]:
        """Inside: every transaction mined as it arrives, also on a chain with a block time; the
        block time again afterwards. For one-off set-up (deploying the contracts) that tests and
        the local market do before the parties act, so that only the parties wait for blocks.
        anvil's interval is whole seconds: a fractional block time keeps waiting for blocks."""
        interval = self.block_time
        if not interval or self.mixed_mining or not float(interval).is_integer():
            yield
            return
        web3 = Web3(Web3.HTTPProvider(self.rpc_url))
        web3.provider.make_request(RPCEndpoint("evm_setAutomine"), [True])
        try:
            yield
        finally:
            web3.provider.make_request(RPCEndpoint("evm_setIntervalMining"), [int(interval)])

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> "LocalChain":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _clock_from_latest_block(web3: Web3) -> None:
    """A loaded chain's clock is the wall clock again, and the chain's time moved forward before
    (evm_increaseTime) is not kept: new blocks would be older than the last one. Its clock then
    goes on from that block."""
    latest = web3.eth.get_block("latest")["timestamp"]
    if latest >= time.time():
        web3.provider.make_request(RPCEndpoint("evm_setTime"), [latest + 1])
