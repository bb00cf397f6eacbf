"""The README's walkthrough, run as written: an operator, a provider, a verifier and a renter, each
in their own terminal (a bash session here), through a job, a challenge, a lease and payouts.

The commands come from the README's "Walkthrough" section (its ```bash blocks; the first line of
each names the terminal), so the README and this test cannot drift apart. What the test adds is
only what a person does by looking: waiting until the provider is verified, the job committed,
the challenge answered; and, as a test must, free ports instead of the README's defaults
(8545, 8000, 9108) and a private HOME, and chain time moved past the challenge window
(evm_increaseTime) instead of waiting ten minutes.

A command the README names that this tree lacks fails the test.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import typer
from web3 import Web3

from client.ports import free_port
from devtools.market import dev_account, wait_for
from devtools.up import LOCAL_PARAMS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
BIN = Path(sys.executable).parent
LONG_RUNNING = ("unchained up", "unchained provider run", "unchained verifier run")
PROVIDER = dev_account(1).address


@dataclass
class Block:
    terminal: str
    lines: list[str]


def readme_blocks() -> list[Block]:
    text = README.read_text()
    section = text[text.index("## Walkthrough"):]
    section = section[:section.index("\n## ", 3)]
    blocks = []
    for body in re.findall(r"```bash\n(.*?)```", section, re.S):
        raw = [line.rstrip() for line in body.strip().splitlines()]
        assert raw[0].startswith("# "), f"a walkthrough block must start with '# <terminal>': {raw[0]!r}"
        lines = [line for line in raw[1:] if line and not line.startswith("#")]
        blocks.append(Block(raw[0][2:].split()[0], lines))
    return blocks


# -- which commands this tree has -----------------------------------------------------------------


def _tree() -> object:
    from unchained_cli.main import app

    return typer.main.get_command(app)


def _resolve(line: str) -> tuple[list[str], object | None]:
    """The command words of a `unchained ...` line and the command, None when this tree lacks it."""
    parts = shlex.split(line.replace("$K", "K"))
    assert parts[0] == "unchained", line
    words: list[str] = []
    node = _tree()
    for part in parts[1:]:
        commands = getattr(node, "commands", None)
        if commands is None:  # a leaf command: the rest are its arguments
            return words, node
        words.append(part)
        if part not in commands:
            return words, None
        node = commands[part]
    return words, node


# -- terminals ------------------------------------------------------------------------------------


@dataclass
class Terminal:
    name: str
    env: dict[str, str]
    cwd: Path
    proc: subprocess.Popen = field(init=False)
    lines: list[str] = field(default_factory=list)
    busy: bool = False  # running a service in the foreground

    def __post_init__(self) -> None:
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=self.env, cwd=self.cwd,
                                     start_new_session=True, bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def type(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def run(self, command: str, timeout: float = 300.0) -> tuple[int, str]:
        """Types a command and waits for it to finish; returns its status and output."""
        marker = f"__done_{uuid.uuid4().hex}__"
        start = len(self.lines)
        self.type(f"{command}\necho {marker} $?")
        done = wait_for(lambda: any(line.startswith(marker) for line in self.lines[start:]), timeout, 0.1)
        output = self.lines[start:]
        assert done, f"[{self.name}] {command} did not finish in {timeout:.0f}s:\n" + "\n".join(output[-40:])
        end = next(i for i, line in enumerate(output) if line.startswith(marker))
        return int(output[end].split()[1]), "\n".join(output[:end])

    def output(self) -> str:
        return "\n".join(self.lines)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)  # like closing the terminal: `up` stops its processes
                self.proc.wait(timeout=60)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


# -- the walkthrough ------------------------------------------------------------------------------


@dataclass
class Walk:
    home: Path
    ports: dict[str, int]
    terminals: dict[str, Terminal] = field(default_factory=dict)
    config_env: dict[str, str] = field(default_factory=dict)

    def terminal(self, name: str) -> Terminal:
        """The party's terminal; a new one when its first runs a service (as a person opens one)."""
        while name in self.terminals and self.terminals[name].busy:
            name += "+"
        if name not in self.terminals:
            env = {"HOME": str(self.home), "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin", "COLUMNS": "120",
                   "PYTHONUNBUFFERED": "1", "LANG": "C.UTF-8"}
            cwd = self.home / name.rstrip("+")  # the same person opens another terminal where it works
            cwd.mkdir(parents=True, exist_ok=True)
            self.terminals[name] = Terminal(name, env, cwd)
        return self.terminals[name]

    @property
    def backend(self) -> str:
        return f"http://127.0.0.1:{self.ports['backend']}"

    def api(self, path: str) -> object:
        try:
            response = httpx.get(self.backend + path, timeout=10)
        except httpx.HTTPError:
            return None
        return response.json() if response.status_code == 200 else None

    def adapt(self, line: str) -> str:
        """The README's line as this test runs it: free ports instead of the defaults."""
        if line.startswith("unchained up"):
            return f"{line} --port {self.ports['rpc']} --backend-port {self.ports['backend']}"
        if line.startswith("unchained provider run"):
            line = f"{line} --metrics-port {self.ports['metrics']}"
        if line.startswith("unchained verifier run"):
            line = f"{line} --metrics-port 0"
        if not line.startswith("unchained "):
            return line
        words, command = _resolve(line)
        assert command is not None, f"the README names `unchained {' '.join(words)}`, which this tree lacks"
        return line

    def block(self, block: Block, check: Callable[[str, int, str], None] | None = None) -> Terminal:
        term = self.terminal(block.terminal)
        for line in block.lines:
            command = self.adapt(line.replace("~/", f"{self.home}/"))
            if line.startswith(LONG_RUNNING):
                term.type(command)
                term.busy = True
                continue
            code, output = term.run(command)
            if check is not None:
                check(line, code, output)
            else:
                assert code == 0, f"[{term.name}] {line} -> {code}:\n{output}"
        return term


@pytest.fixture
def walk(tmp_path: Path) -> Iterator[Walk]:
    home = tmp_path / "home"
    home.mkdir()
    w = Walk(home, {"rpc": free_port(), "backend": free_port(), "metrics": free_port()})
    try:
        yield w
    finally:
        for name in ("renter", "verifier", "provider", "operator"):
            if name in w.terminals:
                w.terminals[name].close()
        for term in w.terminals.values():
            print(f"---- {term.name} ----\n" + "\n".join(term.lines[-60:]))


def test_the_readme_walkthrough_runs_as_written(walk: Walk) -> None:
    blocks = readme_blocks()
    assert [b.terminal for b in blocks] == ["operator", "provider", "verifier", "renter", "renter", "renter",
                                            "provider"], "the walkthrough changed: update the waits below"
    operator, provider, verifier, submit, result, lease, payout = blocks

    up = walk.block(operator)
    assert wait_for(lambda: "In every other terminal" in up.output(), 240, 0.5), up.output()
    assert f"export UNCHAINED_CONFIG={walk.home}/.unchained/31337/config.toml" in up.output()

    agent = walk.block(provider)

    def registered() -> bool:
        assert agent.proc.poll() is None and "error:" not in agent.output(), agent.output()
        try:
            return bool(httpx.get(f"http://127.0.0.1:{walk.ports['metrics']}/status", timeout=2).json()["registered"])
        except (httpx.HTTPError, ValueError, KeyError):
            return False

    assert wait_for(registered, 240, 1.0), agent.output()

    checker = walk.block(verifier)
    address = PROVIDER.lower()
    assert wait_for(lambda: (walk.api(f"/providers/{address}") or {}).get("pog_passed"), 300, 1.0), \
        checker.output()

    renter = walk.block(submit)
    assert "job 1 funded" in renter.output(), renter.output()
    assert wait_for(lambda: (walk.api("/jobs/1") or {}).get("status") == "committed", 240, 1.0), agent.output()

    walk.block(result)
    assert len(list((renter.cwd / "results").iterdir())) == 3
    assert "verified against output root" in renter.output()
    assert wait_for(lambda: any(c["status"] != "open" for c in walk.api("/challenges?kind=job") or []), 240, 1.0), \
        agent.output()

    def lease_step(line: str, code: int, output: str) -> None:
        if line.startswith("unchained job refund"):  # job 1 was paid: it says why not, in one line
            assert "Traceback" not in output and output.strip(), output
        else:
            assert code == 0, f"{line} -> {code}:\n{output}"

    walk.block(lease, lease_step)
    assert re.search(r"lease 1: 1 GPU\(s\)", renter.output()) and "lease 1 ended" in renter.output()

    web3 = Web3(Web3.HTTPProvider(f"http://127.0.0.1:{walk.ports['rpc']}"))
    web3.provider.make_request("evm_increaseTime", [LOCAL_PARAMS.challenge_window + 60])
    web3.provider.make_request("evm_mine", [])
    assert wait_for(lambda: (walk.api("/jobs/1") or {}).get("status") == "finalized", 180, 1.0), agent.output()

    second = walk.block(payout)
    assert second is not agent and re.search(r"status\s+finalized", second.output()), second.output()
