"""A verifier whose backend goes away says so once, says once when it is back, prints no
traceback meanwhile, and goes on working afterwards. Real processes (devtools.market): anvil, a
private redis-server, the backend and `unchained verifier run`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools.market import LocalMarket, MarketPlan, dev_account, wait_for
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")

PLAN = MarketPlan(providers=(), verifiers=(2,), renters=(), pog_interval_s=3600.0)


@pytest.fixture
def market(tmp_path: Path) -> Iterator[LocalMarket]:
    with LocalMarket(PLAN, tmp_path / "market") as started:
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
