"""`unchained provider list` (and its alias `offers`) against a live backend and anvil: every
provider with its class, TFLOPS, price, reputation, free GPUs and last heartbeat; a slashed
provider, one that failed its last Proof of GPU, one slashed below the minimum stake and one whose
agent went silent shown as not available, with why; filters and sorting as `vastai search offers`
has them; and prices, stake and PoG read from the chain, not from a backend that lies."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import backend_support as support
import httpx
import pytest
import typer
from typer.testing import CliRunner

from renter.cli import provider_list
from renter.client import BackendClient
from tests.support.served import lying
from tests.support.waiting import wait_until
from unchained_cli.errors import GuardedGroup
from unchained_cli.main import app as unchained

ETH = 10**18
STALE_S = 1.0
root = typer.Typer(cls=GuardedGroup)
root.command("list")(provider_list)
root.callback()(lambda: None)
runner = CliRunner()


@pytest.fixture(scope="module")
def server(chain, market, tmp_path_factory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    with support.live_backend(chain, tmp_path_factory.mktemp("offers"), provider_stale_s=STALE_S) as url:
        yield url


@pytest.fixture(scope="module")
def drained(session, market) -> str:  # type: ignore[no-untyped-def]
    return support.drained_provider(session, market)


def _args(server: str, chain) -> list[str]:  # type: ignore[no-untyped-def]
    return ["--backend", server, *support.chain_args(chain)]


def _listed(server: str, chain, *extra: str) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    result = runner.invoke(root, ["list", *_args(server, chain), "-o", "json", *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def _indexed(server: str, who: str, check: Callable[[dict[str, Any]], bool]) -> None:
    wait_until(lambda: (r := httpx.get(f"{server}/providers/{who.lower()}")).status_code == 200 and check(r.json()),
               15, f"provider {who} indexed")


def test_the_api_and_the_cli_give_one_answer_for_a_provider_slashed_above_the_minimum(  # type: ignore[no-untyped-def]
        server, chain, session, market, drained) -> None:
    """The market's provider lost a job dispute after its last passed PoG round, its stake still
    above the minimum: the backend's /providers, its matcher and the CLI all refuse it, in the
    same words (protocol.availability); a new passed round makes all three take it back."""
    registry = session.contract("ProviderRegistry")
    assert registry.functions.isActive(market.provider).call()  # above the minimum: the chain calls it active
    _indexed(server, drained, lambda row: row["pog_round_id"] is not None)
    _indexed(server, market.provider, lambda row: row["stake_slashed"] != "0")

    def agree() -> dict[str, Any]:
        api = {r["address"]: r for r in httpx.get(f"{server}/providers").json()}
        cli = {o["address"].lower(): o for o in _listed(server, chain)}
        assert set(api) == set(cli)
        for address, offer in cli.items():
            assert (api[address]["available"], api[address]["why_not"]) == (offer["available"], offer["why_not"]), address
        return cli

    slashed = agree()[market.provider.lower()]
    assert slashed["available"] is False and slashed["stake"] != "0", slashed
    assert slashed["why_not"] == [f"slashed after its last passed Proof of GPU (round {slashed['pog_round_id']}): "
                                  "not trusted again before it passes a new one"]
    quotes = httpx.post(f"{server}/quotes", json={"items": 2, "max_price_wei": str(10**18)}).json()
    assert quotes == [], quotes
    explained = httpx.post(f"{server}/quotes/explain", json={"items": 2}).json()
    assert explained["reason"] == "none-verified" and "slashed after its last passed" in explained["message"], explained

    round_id = support.pog_round(session, market, market.provider, True, "H100-SXM", 700_000)
    _indexed(server, market.provider, lambda row: row["pog_round_id"] == round_id)
    assert agree()[market.provider.lower()]["available"] is True
    quotes = httpx.post(f"{server}/quotes", json={"items": 2, "max_price_wei": str(10**18)}).json()
    assert [q["provider"] for q in quotes] == [market.provider.lower()], quotes
    # Slashed again (a second lost dispute), still above the minimum: refused again by both.
    support.disputed_job(session, market)
    _indexed(server, market.provider, lambda row: row["available"] is False)
    assert agree()[market.provider.lower()]["available"] is False
    assert registry.functions.isActive(market.provider).call()


def test_offers_say_who_is_not_available_and_why(server, chain, session, market, drained) -> None:  # type: ignore[no-untyped-def]
    _indexed(server, drained, lambda row: row["pog_round_id"] is not None)
    offers = {o["address"]: o for o in _listed(server, chain)}
    assert set(offers) == {market.provider, market.provider2, drained}
    # The market's provider lost a job dispute after its last passed round: its PoG status still
    # says passed, yet a renter must not count on it.
    slashed = offers[market.provider]
    assert slashed["available"] is False and slashed["pog_passed"] is True and slashed["slashed_at"], slashed
    assert any("after its last passed Proof of GPU" in why for why in slashed["why_not"]), slashed
    failed = offers[market.provider2]
    assert failed["available"] is False and failed["gpu_class"] is None and failed["tflops"] is None
    assert any(why.startswith("failed its last Proof of GPU (round") for why in failed["why_not"]), failed
    below = offers[drained]
    assert below["available"] is False and below["stake"] == "0"
    assert "slashed 1 ETH: stake 0 ETH below the minimum 1 ETH" in below["why_not"], below

    text = " ".join(runner.invoke(root, ["list", *_args(server, chain)], terminal_width=300).output.split())
    assert f"{market.provider2} NOT AVAILABLE claims RTX-4090 2 of 2 GPU(s) free" in text, text
    assert "not available: failed its last Proof of GPU" in text and "0.005 ETH per GPU-hour" in text

    # A new passed round clears the slash: available, first, with its class and TFLOPS.
    support.pog_round(session, market, market.provider, True, "H100-SXM", 720_000)
    available = _listed(server, chain, "--available")
    assert [o["address"] for o in available] == [market.provider], available
    assert available[0]["gpu_class"] == "H100-SXM" and available[0]["tflops"] == 720.0 and not available[0]["why_not"]
    text = " ".join(runner.invoke(root, ["list", *_args(server, chain)], terminal_width=300).output.split())
    assert text.startswith(f"{market.provider} available H100-SXM (720 TFLOPS) 1 of 1 GPU(s) free"), text
    assert "0.009 ETH per GPU-hour, 0.000001 ETH per job unit" in text and "reputation" in text

    # Once its agent falls silent past the backend's bound, it is not available either.
    provider = BackendClient.connect(server, support.anvil_key(1))
    assert provider.http.post(f"/providers/{market.provider}/heartbeat", headers=provider._auth()).status_code == 204
    _indexed(server, market.provider, lambda row: row["available"] is False)
    silent = {o["address"]: o for o in _listed(server, chain)}[market.provider]
    assert silent["available"] is False and silent["last_seen"] is not None
    assert any(why.startswith("its agent has not sent a heartbeat since") for why in silent["why_not"]), silent


def test_offers_filter_and_sort_like_vastai(server, chain, session, market, drained) -> None:  # type: ignore[no-untyped-def]
    _indexed(server, drained, lambda row: row["pog_round_id"] is not None)
    assert [o["address"] for o in _listed(server, chain, "--class", "h100-sxm")] == [market.provider]
    assert [o["address"] for o in _listed(server, chain, "--min-gpus", "2")] == [market.provider2]
    assert market.provider not in {o["address"] for o in _listed(server, chain, "--max-price", "0.0085")}
    by_price = [o["price_per_gpu_hour"] for o in _listed(server, chain, "--sort", "price")]
    assert [int(p) for p in by_price] == sorted(int(p) for p in by_price)
    by_free = [o["free_gpus"] for o in _listed(server, chain, "--sort", "free")]
    assert by_free == sorted(by_free, reverse=True)
    bad = runner.invoke(root, ["list", *_args(server, chain), "--sort", "cheapest"])
    assert bad.exit_code == 2 and "'cheapest' is not one of" in bad.output
    none = runner.invoke(root, ["list", *_args(server, chain), "--class", "B200"], catch_exceptions=False)
    assert none.exit_code == 0 and "no offers match" in none.output
    # The same command under `unchained provider list` and `unchained offers`.
    for words in (["provider", "list"], ["offers"]):
        same = runner.invoke(unchained, [*words, *_args(server, chain), "-o", "json"], catch_exceptions=False)
        assert same.exit_code == 0 and {o["address"] for o in json.loads(same.output)} >= {market.provider}


def test_prices_stake_and_proof_come_from_the_chain_not_the_backend(  # type: ignore[no-untyped-def]
        server, chain, session, market, drained) -> None:
    """A backend siding with providers shows them cheap, verified, richly staked and available,
    and one that never registered: the list shows what the contracts say."""
    invented = session.accounts[9]

    def flattering(path: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not path.startswith("/providers"):
            return rows
        rows = rows + [{**rows[0], "address": invented.lower()}]
        return [{**row, "price_per_gpu_hour": "1", "price_per_job_unit": "1", "stake_bonded": str(100 * ETH),
                 "pog_passed": True, "gpu_class": "H100-SXM", "tflops": 999.0, "active": True, "available": True}
                for row in rows]

    with lying(server, flattering) as evil:
        offers = {o["address"]: o for o in _listed(evil, chain)}
    failed, below, fake = offers[market.provider2], offers[drained], offers[invented]
    assert failed["price_per_gpu_hour"] == str(5 * 10**15) and failed["gpu_class"] is None
    assert failed["available"] is False and below["available"] is False and below["stake"] == "0"
    assert fake["available"] is False and fake["why_not"] == ["not registered on-chain"] and fake["price_per_gpu_hour"] == "0"
