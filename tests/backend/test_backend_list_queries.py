"""A list route reads its rows and what each row shows in a fixed number of SQL statements, however
many rows it returns (no query per row: the off-chain rows come with the list, selectinload)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from backend import models as m
from backend.api.app import create_app
from backend.settings import Settings

ADDRESS = "0x" + "ab" * 20
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    """The API over an empty SQLite index; nothing here reaches a chain."""
    settings = Settings(data_dir=tmp_path, rpc_url="http://127.0.0.1:9", dispatch=False, run_indexer=False,
                        public_url="http://testserver")
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _add_jobs(client: TestClient, first: int, count: int) -> None:
    """Jobs with every off-chain row their listing shows: a stored spec, a dispatch, a failure report."""
    with client.app.state.backend.factory() as db:  # type: ignore[attr-defined]
        for job_id in range(first, first + count):
            spec_hash = "0x" + f"{job_id:064x}"
            db.add(m.JobSpecRecord(spec_hash=spec_hash, canonical='{"job": %d}' % job_id, model="0x" + "00" * 32,
                                   item_count=1, created_at=NOW))
            db.add(m.Job(job_id=job_id, renter=ADDRESS, provider=ADDRESS, token=ADDRESS, price=10, spec_hash=spec_hash,
                         deadline=1, status="refunded", funded_tx="0x" + "00" * 32, funded_block=1))
            db.add(m.Dispatch(job_id=job_id, queue=f"provider.{job_id}"))
            db.add(m.JobFailure(job_id=job_id, kind="oom", error=f"job {job_id}", reported_at=NOW))
        db.commit()


def _add_providers(client: TestClient, first: int, count: int) -> None:
    with client.app.state.backend.factory() as db:  # type: ignore[attr-defined]
        for n in range(first, first + count):
            address = "0x" + f"{n:040x}"
            db.add(m.Provider(address=address, gpu_model="H100", gpu_count=1, price_per_gpu_hour=1,
                              price_per_job_unit=1, registered_block=n))
            db.add(m.Stake(account=address, bonded=n, unbonding=0, slashed=0))
            db.add(m.ProviderProfile(address=address, cached_models=[], private_ok=True, latency_ms=n,
                                     updated_at=NOW))
        db.commit()


def _statements(client: TestClient, path: str, params: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    """The SQL statements one GET ran, and its rows."""
    engine = client.app.state.backend.engine  # type: ignore[attr-defined]
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        response = client.get(path, params=params)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert response.status_code == 200, response.text
    return len(seen), response.json()


def test_listing_jobs_takes_as_many_statements_for_500_rows_as_for_3(client: TestClient) -> None:
    _add_jobs(client, 1, 3)
    few, rows = _statements(client, "/jobs", {"limit": 500})
    assert [(r["job_id"], r["spec"], r["dispatched_to"], r["failure"]) for r in rows] == [
        (job_id, {"job": job_id}, f"provider.{job_id}", f"oom: job {job_id}") for job_id in (3, 2, 1)]
    _add_jobs(client, 4, 497)
    many, rows = _statements(client, "/jobs", {"limit": 500})
    assert len(rows) == 500 and rows[-1]["spec"] == {"job": 1} and rows[0]["dispatched_to"] == "provider.500"
    assert many == few <= 5, f"{few} statements for 3 jobs, {many} for 500"


def test_listing_providers_takes_as_many_statements_for_200_rows_as_for_3(client: TestClient) -> None:
    _add_providers(client, 1, 3)
    few, rows = _statements(client, "/providers", {"limit": 500})
    assert [(r["stake_bonded"], r["latency_ms"], r["private_ok"]) for r in rows] == [
        (str(n), n, True) for n in (1, 2, 3)]
    _add_providers(client, 4, 197)
    many, rows = _statements(client, "/providers", {"limit": 500})
    assert len(rows) == 200 and rows[-1]["latency_ms"] == 200
    assert many == few <= 5, f"{few} statements for 3 providers, {many} for 200"
