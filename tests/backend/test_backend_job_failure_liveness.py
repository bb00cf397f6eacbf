"""A provider that cannot run a job fails it on-chain: the backend indexes JobFailed (status,
refund, reason), `job status` shows the failure and `job refund` says there is nothing left to
take; `job refund` cancels, refunds expired jobs or says exactly why not and when. A provider
whose agent stopped beating is not shown as available nor quoted; `job submit` learns why no
provider fits."""

from __future__ import annotations

import time

import backend_support as support
import pytest
import typer
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from client.backend_http import ApiError
from client.escrow_jobs import read_job
from backend.api.app import create_app
from renter.cli import job_app
from renter.client import BackendClient
from backend.matching import Candidate, Request, explain
from protocol.merkle import keccak256
from unchained_cli.errors import GuardedGroup

root = typer.Typer(cls=GuardedGroup)  # errors end as `unchained` shows them: one line
root.add_typer(job_app, name="job")
runner = CliRunner()
ZERO = "0x" + "00" * 20
PRICE = 10**15


def _said(*args: str, code: int = 0) -> str:
    result = runner.invoke(root, list(args), terminal_width=300)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def _wait(predicate, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            value = predicate()
        except ApiError as exc:  # 404 until the indexer has seen the job
            if exc.status != 404:
                raise
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def _job(session, market, tag: bytes, deadline_in: int = 3600) -> int:  # type: ignore[no-untyped-def]
    escrow = session.contract("JobEscrow")
    session.send(escrow.functions.createJob(market.provider, keccak256(tag), PRICE, session.now() + deadline_in),
                 market.renter, value=PRICE)
    return escrow.functions.jobCount().call()


def test_a_failed_job_is_indexed_shown_with_its_reason_and_not_refundable_twice(  # type: ignore[no-untyped-def]
        server, chain, session, market, keystore) -> None:
    escrow = session.contract("JobEscrow")
    job_id = _job(session, market, b"spec-fail")
    reason = "model-error: RuntimeError: model bug: division by zero in layer 3"
    session.send(escrow.functions.failJob(read_job(escrow, job_id).as_tuple(), reason), market.provider)
    api = BackendClient.connect(server)
    job = _wait(lambda: (j := api.get(f"/jobs/{job_id}"))["status"] == "refunded" and j)
    assert job["failure"] == reason and job["failure_reason"] == reason and job["refund"] == str(PRICE)

    status = _said("job", "status", str(job_id), "--backend", server, "--rpc", chain[0].rpc_url,
                   "--deployment", str(chain[2]))
    assert f"could not run job {job_id} (on-chain, JobFailed): {reason}" in status
    assert "the renter was refunded 0.001 ETH" in status and "unchained withdraw" in status
    refund = _said("job", "refund", str(job_id), "--keystore", str(keystore), "--rpc", chain[0].rpc_url,
                   "--deployment", str(chain[2]), code=1)
    assert "already refunded" in refund and "unchained withdraw" in refund


def test_job_refund_cancels_waits_or_refunds_after_the_deadline(server, chain, session, market,  # type: ignore[no-untyped-def]
                                                               keystore) -> None:
    escrow = session.contract("JobEscrow")
    common = ("--keystore", str(keystore), "--rpc", chain[0].rpc_url, "--deployment", str(chain[2]))
    owed = escrow.functions.owedTo(ZERO, market.renter).call()

    funded = _job(session, market, b"spec-cancel")
    said = _said("job", "refund", str(funded), *common)  # step one: the request
    assert "cancel requested" in said and "run `unchained job refund" in said
    assert escrow.functions.owedTo(ZERO, market.renter).call() == owed
    said = _said("job", "refund", str(funded), *common, code=1)  # inside the grace: says from when
    assert "cancel already requested" in said and "can be cancelled from" in said
    api = BackendClient.connect(server)
    shown = _wait(lambda: (j := api.get(f"/jobs/{funded}"))["status"] == "cancel requested" and j)
    assert shown["cancellable_at"] is not None
    session.advance(escrow.functions.cancelGrace().call())
    said = _said("job", "refund", str(funded), *common)  # the grace passed with no commit
    assert "cancelled before the provider committed a result" in said and "unchained withdraw" in said
    assert escrow.functions.owedTo(ZERO, market.renter).call() == owed + PRICE

    late = _job(session, market, b"spec-wait", deadline_in=1800)
    session.advance(1801)
    said = _said("job", "refund", str(late), *common)
    assert "passed its deadline" in said and "credited to you" in said
    assert escrow.functions.owedTo(ZERO, market.renter).call() == owed + 2 * PRICE

    committed = _job(session, market, b"spec-committed")
    support.commit_outputs(session, market.provider, committed, [b"a", b"b"])
    said = _said("job", "refund", str(committed), *common, code=1)
    assert "committed a result" in said and f"unchained job challenge {committed}" in said
    said = _said("job", "refund", "999999", *common, code=1)
    assert "does not exist" in said


@pytest.fixture(scope="module")
def quick_stale(chain, session, market, tmp_path_factory):  # type: ignore[no-untyped-def]
    support.reverify(session, market)  # slashed after its last passed round: not available before
    settings = support.make_settings(chain, tmp_path_factory.mktemp("liveness"), provider_stale_s=2.0)
    with TestClient(create_app(settings)) as client:
        client.app.state.backend.make_indexer().sync()
        yield client


def test_a_provider_whose_heartbeat_stops_is_not_available_nor_quoted(quick_stale, market) -> None:  # type: ignore[no-untyped-def]
    api = quick_stale
    address = market.provider.lower()
    provider = BackendClient(api, support.anvil_key(1))
    request = {"items": 2, "max_price_wei": str(10**18)}

    def shown() -> dict:  # type: ignore[type-arg]
        return api.get(f"/providers/{address}").json()

    never = shown()
    assert never["last_seen_at"] is None and never["available"] is True  # never heard: not presumed dead
    assert api.post(f"/providers/{address}/heartbeat").status_code == 401
    stranger = BackendClient(api, support.anvil_key(4))
    assert api.post(f"/providers/{address}/heartbeat", headers=stranger._auth()).status_code == 403

    assert api.post(f"/providers/{address}/heartbeat", headers=provider._auth()).status_code == 204
    assert shown()["available"] is True and shown()["last_seen_at"] is not None
    assert [q["provider"] for q in api.post("/quotes", json=request).json()] == [address]
    assert api.post("/quotes/explain", json=request).json() == {"fits": True, "reason": None, "message": None,
                                                                 "cheapest_price_wei": None}
    # The agent crashes: no more beats. Past the bound it is unavailable and not quoted.
    _wait(lambda: shown()["available"] is False, timeout=15)
    assert address not in {p["address"] for p in api.get("/providers", params={"available": True}).json()}
    assert address in {p["address"] for p in api.get("/providers", params={"available": False}).json()}
    assert api.post("/quotes", json=request).json() == []
    why = api.post("/quotes/explain", json=request).json()
    assert why["fits"] is False and why["reason"] in ("none-verified", "none-available"), why
    # It comes back: one beat and it is offered again.
    assert api.post(f"/providers/{address}/heartbeat", headers=provider._auth()).status_code == 204
    assert [q["provider"] for q in api.post("/quotes", json=request).json()] == [address]


def _candidate(address: str, *, active: bool = True, passed: bool = True, price: int = 10**12,
               gpu_class: str = "H100-SXM") -> Candidate:
    return Candidate(address, gpu_class, 1000, passed, active, price, 0, None, frozenset(), False, 0, 0)


def test_explain_names_the_first_filter_that_leaves_nobody() -> None:
    ask = Request(model=None, items=3, max_price_wei=10**12)
    assert explain(ask, []).reason == "no-providers"
    assert explain(ask, [_candidate("a", active=False)]).reason == "none-active"
    assert explain(ask, [_candidate("a")], stale=frozenset({"a"})).reason == "none-available"
    pending = explain(ask, [_candidate("a", passed=False), _candidate("b", passed=False)])
    assert pending.reason == "none-verified" and "2 running provider(s) await their first Proof-of-GPU round" \
        in pending.message
    wrong = explain(Request(model=None, items=3, gpu_classes=frozenset({"A100"})), [_candidate("a")])
    assert wrong.reason == "none-in-class" and "H100-SXM" in wrong.message
    assert explain(Request(model=None, items=3, private=True), [_candidate("a")]).reason == "none-private"
    cheap = explain(ask, [_candidate("a", price=10**12), _candidate("b", price=2 * 10**12)])
    assert cheap.reason == "price-too-low" and cheap.cheapest_price_wei == 3 * 10**12
    assert "your maximum 0.000001 ETH" in cheap.message and "for 3 items: 0.000003 ETH" in cheap.message
    assert explain(Request(model=None, items=3, max_price_wei=3 * 10**12), [_candidate("a")]) is None
