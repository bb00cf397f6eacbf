"""Pure parts: EIP-4361 message format, provider ranking, and migrations matching the models."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from backend.db import make_engine, migrate
from backend.matching import Candidate, Request, rank, reputation
from backend.models import Base
from protocol.siwe import SiweError, SiweMessage

ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def _message(**changes: object) -> SiweMessage:
    fields: dict[str, object] = dict(domain="localhost:8000", address=ADDRESS, uri="http://localhost:8000",
                                     chain_id=31337, nonce="abcdef0123456789", issued_at=NOW,
                                     expiration_time=NOW + timedelta(minutes=5), statement="Sign in.")
    fields.update(changes)
    return SiweMessage(**fields)  # type: ignore[arg-type]


def test_siwe_text_follows_eip4361_and_round_trips() -> None:
    text = _message().text()
    assert text.splitlines() == [
        "localhost:8000 wants you to sign in with your Ethereum account:", ADDRESS, "", "Sign in.", "",
        "URI: http://localhost:8000", "Version: 1", "Chain ID: 31337", "Nonce: abcdef0123456789",
        "Issued At: 2026-11-22T12:00:00Z", "Expiration Time: 2026-11-22T12:05:00Z",
    ]
    assert SiweMessage.parse(text) == _message()
    no_statement = _message(statement="")
    assert SiweMessage.parse(no_statement.text()) == no_statement


@pytest.mark.parametrize("mutate, error", [
    (lambda t: t.replace(ADDRESS, ADDRESS.lower()), "EIP-55"),
    (lambda t: t.replace("Version: 1", "Version: 2"), "Version"),
    (lambda t: t.replace("Nonce: abcdef0123456789", "Nonce: short"), "Nonce"),
    (lambda t: t.replace("\nExpiration Time: 2026-11-22T12:05:00Z", ""), "fields"),
    (lambda t: t.replace("12:05:00Z", "12:05:00+00:00"), "canonical"),
    (lambda t: t + "\nResources: x", "fields"),
    (lambda t: "x" * 5000, "longer"),
])
def test_siwe_parse_rejects_malformed_messages(mutate, error) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SiweError, match=error):
        SiweMessage.parse(mutate(_message().text()))


def _candidate(address: str, **changes: object) -> Candidate:
    fields: dict[str, object] = dict(address=address, gpu_class="H100-SXM", tflops_milli=700_000, pog_passed=True,
                                     active=True, price_per_job_unit=100, queue_length=0, latency_ms=50,
                                     cached_models=frozenset(), private_ok=False, challenges_won=0,
                                     challenges_lost=0)
    fields.update(changes)
    return Candidate(**fields)  # type: ignore[arg-type]


def test_ranking_filters_then_prefers_cheap_idle_cached_reputable() -> None:
    model = "0x" + "aa" * 32
    pool = [
        _candidate("unverified", pog_passed=False, price_per_job_unit=1),
        _candidate("inactive", active=False, price_per_job_unit=1),
        _candidate("expensive", price_per_job_unit=1000),
        _candidate("busy", queue_length=10),
        _candidate("cached", cached_models=frozenset({model})),
        _candidate("plain"),
    ]
    order = [r.candidate.address for r in rank(Request(model=model, items=10), pool)]
    assert order[:2] == ["cached", "plain"] and order[-1] == "expensive"
    assert "unverified" not in order and "inactive" not in order
    within_budget = rank(Request(model=None, items=10, max_price_wei=1000), pool)
    assert {r.candidate.address for r in within_budget} == {"busy", "cached", "plain"}
    assert within_budget[-1].candidate.address == "busy"
    private = rank(Request(model=None, items=1, private=True), pool + [_candidate("enclave", private_ok=True)])
    assert [r.candidate.address for r in private] == ["enclave"]
    classes = rank(Request(model=None, items=1, gpu_classes=frozenset({"A100"})), pool)
    assert classes == []


def test_reputation_rises_with_survived_challenges_and_falls_with_slashes() -> None:
    fresh, good, bad = _candidate("a"), _candidate("b", challenges_won=9), _candidate("c", challenges_lost=3)
    assert reputation(bad) < reputation(fresh) == 0.5 < reputation(good)
    order = [r.candidate.address for r in rank(Request(model=None, items=1), [fresh, bad, good])]
    assert order == ["b", "a", "c"]


def test_migrations_create_exactly_the_models_schema(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(f"sqlite:///{tmp_path / 'schema.db'}")
    migrate(engine)
    migrate(engine)  # idempotent
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []
