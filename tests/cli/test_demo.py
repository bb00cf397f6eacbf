"""`unchained demo` end to end, as CI runs it: the whole market as real processes.

The scenario must end the way the README says: the honest provider's job paid after its window,
the cheater's garbage job refunded to its renter after a committee vote, the cheater slashed for
its PoG fraud and for the job, the lease refunded with the miner yielding to it and resuming,
every wei accounted for, and no process left behind, also when the demo is interrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import psutil
import pytest
from rich.console import Console

from devtools.demo import DEMO_PLAN, run
from devtools.market import plan_from_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_the_demo_pays_the_honest_provider_refunds_the_cheaters_renter_and_slashes_the_cheater(tmp_path: Path) -> None:
    out = StringIO()
    # UNCHAINED_TEST_BLOCK_TIME=1: the same scenario on a chain where every transaction waits for a block.
    result = run(Console(file=out, width=200), tmp_path / "market", plan=plan_from_env(DEMO_PLAN))
    text, feed = out.getvalue(), result.feed
    assert feed.state("job", result.honest_job) == "finalized"
    assert feed.state("job", result.cheater_job) == "refunded"
    # Both PoG classes were identified before any job, and the cheater's later round failed.
    assert feed.seen("pog", "passed") and feed.seen("pog", "failed")
    assert "class CPU" in text
    # The cheater was caught twice: its PoG fraud proven on-chain, its job voted at fault.
    challenges = {e.subject: e.text for e in feed.events if e.kind == "challenge" and e.state == "provider_faulted"}
    assert any("PoG round" in t and "cheater" in t for t in challenges.values())
    assert any(f"job {result.cheater_job}" in t for t in challenges.values())
    assert sum(e.kind == "slash" and "cheater slashed" in e.text for e in feed.events) >= 2
    assert not any(e.kind == "slash" and "honest slashed" in e.text for e in feed.events)
    # The lease took the honest provider's GPU from its miner, which resumed after it.
    assert feed.state("lease", result.lease_id) == "ended" and feed.seen("mining", "leased")
    assert feed.state("mining", "honest") == "mining"
    # The renter logged in to the leased machine over SSH and ran a command there.
    assert "over SSH on the leased machine: lease" in text
    # Money: nothing lost, the renters of the cheater made whole, the honest side paid.
    accounts = result.accounts
    assert accounts.unaccounted == 0
    assert "every wei accounted for (parties' change + gas + contracts' change = 0): yes" in text
    assert accounts.change("honest") + accounts.gas["honest"] > -3 * 10**18  # stake still bonded, nothing slashed
    assert accounts.change("treasury") > 0  # fees and slash shares, withdrawn


def test_an_interrupted_demo_stops_every_process_it_started(tmp_path: Path) -> None:
    log = tmp_path / "demo.out"
    with open(log, "wb") as out:
        demo = subprocess.Popen([sys.executable, "-m", "unchained_cli.main", "demo", "--data-dir", str(tmp_path / "m")],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "COLUMNS": "200"})
    try:
        end = time.monotonic() + 180
        while "verifier(s) running" not in log.read_text() and time.monotonic() < end:
            assert demo.poll() is None, log.read_text()
            time.sleep(0.5)
        children = psutil.Process(demo.pid).children(recursive=True)
        names = " ".join(" ".join(c.cmdline()) for c in children)
        assert "anvil" in names and "backend serve" in names and "provider run" in names and "verifier run" in names
        demo.send_signal(signal.SIGINT)  # Ctrl-C
        assert demo.wait(timeout=90) == 130, log.read_text()[-3000:]
    finally:
        if demo.poll() is None:
            demo.kill()
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, [" ".join(p.cmdline()) for p in alive]
    assert "every process the demo started is stopped" in log.read_text()


def test_a_broker_no_service_could_use_is_refused_before_anything_starts() -> None:
    from typer.testing import CliRunner

    from unchained_cli.main import app

    result = CliRunner().invoke(app, ["demo", "--broker", "amqp://guest@localhost//"])
    assert result.exit_code == 2 and "not a Redis or sqla+sqlite:/// broker" in result.output


def test_the_balance_tables_fit_80_columns_without_cutting_a_number_or_an_address() -> None:
    from devtools.demo import balance_tables
    from devtools.market import Accounts, dev_account, eth

    names = ["treasury", "honest", "cheater", "verifier-1", "verifier-2", "renter-1", "renter-2"]
    addresses = {name: dev_account(i).address for i, name in enumerate(names)}
    before = {name: 10_000 * 10**18 for name in names}
    after = {name: 10_000 * 10**18 - 3 * 10**18 - 123_456_789_012_345 * (i + 1) for i, name in enumerate(names)}
    gas = {name: 987_654_321_098 * (i + 1) for i, name in enumerate(names)}
    accounts = Accounts(before, after, gas, {}, {})
    out = StringIO()
    console = Console(file=out, width=80)
    for table in balance_tables(addresses, accounts, {name: 3 * 10**18 for name in names}):
        console.print(table)
    text = out.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80, text
    for name in names:
        assert addresses[name] in text
        for value in (after[name], accounts.change(name), gas[name]):
            assert eth(value) in text, (name, eth(value), text)
