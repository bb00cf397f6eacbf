"""A provider agent and a verifier whose backend goes away: each says so once, and once when it
is back, with no traceback meanwhile, and goes on working afterwards. A second verifier on the
same work directory is refused in one line. Real processes (devtools.market): anvil, a private
redis-server, the backend, `unchained provider run` and `unchained verifier run`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
import subprocess

import httpx
import pytest

from devtools.market import LocalMarket, MarketPlan, ProviderPlan, dev_account, wait_for
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")

PLAN = MarketPlan(providers=(ProviderPlan("provider-a", 1, mining=False),), verifiers=(2,), renters=(),
                  pog_interval_s=3600.0)


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalMarket]:
    with LocalMarket(PLAN, tmp_path_factory.mktemp("market"), accounts=4) as started:
        yield started


def _metric(market: LocalMarket, name: str) -> float | None:
    try:
        text = httpx.get(f"http://127.0.0.1:{market.metrics_ports['verifier-1']}/metrics", timeout=2).text
    except httpx.HTTPError:
        return None
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")), None)


def test_agent_and_verifier_say_once_that_the_backend_is_away_and_once_that_it_is_back(market: LocalMarket) -> None:
    parties = {"verifier-1": 1, "provider-a": 2}  # name -> seconds between its tries (poll_s, heartbeat_s)
    wait_until(lambda: _metric(market, "unchained_verifier_providers") == 1, 60, "the verifier sees the provider")
    away = {n: f"backend at {market.backend_url} unreachable; retrying every {s} s" for n, s in parties.items()}
    back = f"backend at {market.backend_url} reachable again"
    market.services["backend"].stop(kill=True)
    for name in parties:
        wait_until(lambda: away[name] in market.services[name].tail(10**7), 30, f"{name} says the backend is away")
    start = {name: len(market.services[name].tail(10**7)) for name in parties}
    # A dozen ticks and six heartbeats with the backend away: nothing more is said.
    assert not wait_for(lambda: any(len(market.services[n].tail(10**7)) > start[n] for n in parties), 12, 0.5), \
        {n: market.services[n].tail(10**7)[start[n]:] for n in parties}
    market.start_backend()
    for name in parties:
        wait_until(lambda: back in market.services[name].tail(10**7), 30, f"{name} says the backend is back")
        said = market.services[name].tail(10**7)
        assert said.count(away[name]) == 1 and said.count(back) == 1, said
        assert "Traceback" not in said, said
    # Both still work: a provider registered now is seen by the verifier on a later tick, and the
    # agent's heartbeats reach the backend again.
    session = market.session  # anvil's unlocked development accounts
    assert session is not None
    provider = dev_account(3).address  # funded (accounts=4), and no party of the plan
    registry = session.contract("ProviderRegistry")
    staking = session.contract("Staking")
    session.send(staking.functions.stake(), provider, value=3 * 10**18)
    session.send(registry.functions.register(b"cpu".ljust(32, b"\0"), [b"\1" * 32], 10**16, 10**12, "demo://outage"),
                 provider)
    wait_until(lambda: _metric(market, "unchained_verifier_providers") == 2, 30, "the verifier sees the new provider")
    agent = market.parties["provider-a"].address.lower()
    seen = market.api(f"/providers/{agent}")["last_seen_at"]  # type: ignore[index]
    wait_until(lambda: market.api(f"/providers/{agent}")["last_seen_at"] != seen, 30,  # type: ignore[index]
               "the agent's heartbeat reaches the backend")
    assert all(market.services[n].alive for n in parties)


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
