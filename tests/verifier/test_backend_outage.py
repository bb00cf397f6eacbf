"""A verifier next to its backend and other verifiers: a backend that goes away is said once,
and once when it is back, with no traceback meanwhile, and the verifier goes on working
afterwards; a second verifier on the same work directory is refused in one line. Real processes
(devtools.market): anvil, a private redis-server, the backend and `unchained verifier run`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
import subprocess

import httpx
import pytest

from devtools.market import LocalMarket, MarketPlan, dev_account, wait_for
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")

PLAN = MarketPlan(providers=(), verifiers=(2,), renters=(), pog_interval_s=3600.0)


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalMarket]:
    with LocalMarket(PLAN, tmp_path_factory.mktemp("market")) as started:
        yield started


def _metric(market: LocalMarket, name: str) -> float | None:
    try:
        text = httpx.get(f"http://127.0.0.1:{market.metrics_ports['verifier-1']}/metrics", timeout=2).text
    except httpx.HTTPError:
        return None
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")), None)


def test_verifier_says_once_that_the_backend_is_away_and_once_that_it_is_back(market: LocalMarket) -> None:
    verifier = market.services["verifier-1"]
    wait_until(lambda: _metric(market, "unchained_verifier_providers") is not None, 60, "the verifier's first tick")
    away = f"backend at {market.backend_url} unreachable; retrying every 1 s"
    back = f"backend at {market.backend_url} reachable again"
    market.services["backend"].stop(kill=True)
    wait_until(lambda: away in verifier.tail(20000), 30, "the verifier says the backend is away")
    start = len(verifier.tail(10**7))
    # A dozen ticks (poll_s is 1 s) with the backend away: nothing more is said.
    assert not wait_for(lambda: len(verifier.tail(10**7)) > start, 12, 0.5), verifier.tail(10**7)[start:]
    market.start_backend()
    wait_until(lambda: back in verifier.tail(20000), 30, "the verifier says the backend is back")
    said = verifier.tail(10**7)
    assert said.count(away) == 1 and said.count(back) == 1, said
    assert "Traceback" not in said, said
    # It still works: a provider registered now is seen on a later tick.
    session = market.session  # anvil's unlocked development accounts
    assert session is not None
    provider = dev_account(1).address  # funded, and no party of the plan
    registry = session.contract("ProviderRegistry")
    staking = session.contract("Staking")
    session.send(staking.functions.stake(), provider, value=3 * 10**18)
    session.send(registry.functions.register(b"cpu".ljust(32, b"\0"), [b"\1" * 32], 10**16, 10**12, "demo://outage"), provider)
    wait_until(lambda: _metric(market, "unchained_verifier_providers") == 1, 30, "the verifier sees the new provider")
    assert verifier.alive


def test_a_second_verifier_on_a_work_dir_is_refused_in_one_line_until_the_first_dies(market: LocalMarket) -> None:
    first = market.services["verifier-1"]
    assert first.proc is not None
    said = "stake 3 ETH"  # its first line, once it runs
    wait_until(lambda: said in first.tail(10**7), 60, "the first verifier runs")
    second = subprocess.run(first.argv, env=first.env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 1, (second.stdout, second.stderr)
    assert second.stdout == "" and second.stderr.strip() == (
        f"error: another verifier is running on {market.root / 'verifier-1'} (pid {first.proc.pid}): "
        "stop it first, or pass another --work-dir"), second.stderr
    first.stop(kill=True)  # a crash: the kernel frees the lock with the process
    first.start()
    wait_until(lambda: first.tail(10**7).count(said) == 2 or not first.alive, 60, "the verifier starts again")
    assert first.alive, first.tail()
