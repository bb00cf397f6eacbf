"""Verifiers' decision reports: POST /disputes/reports for staked verifiers only, strict bodies,
listed back by subject, kind and verifier, shown on the challenge, kept by a rebuild from events."""

from __future__ import annotations

import backend_support as support
import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_app
from renter.client import BackendClient
from backend.indexer import rebuild

UNSTAKED = 8  # an anvil account that never stakes here: not a verifier
H = "0x" + "ab" * 32


@pytest.fixture(scope="module")
def app_client(chain, market, tmp_path_factory):  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path_factory.mktemp("reports"))
    with TestClient(create_app(settings)) as client:
        client.app.state.backend.make_indexer().sync()
        yield client


def _headers(client: TestClient, index: int) -> dict[str, str]:
    return BackendClient(client, support.anvil_key(index))._auth()


def _job_challenge(client: TestClient) -> dict:  # type: ignore[type-arg]
    return next(c for c in client.get("/challenges", params={"kind": "job"}).json())


def _body(challenge: dict, **changes: object) -> dict:  # type: ignore[type-arg]
    body = {"kind": "job", "subject": challenge["subject"], "challengeId": challenge["challenge_id"],
            "decision": "challenged", "indices": [1, 3], "expectedDigests": [H, H],
            "receivedDigests": [H, None], "txHashes": ["0x" + "cd" * 32], "detail": "item 3 missing"}
    body.update(changes)
    return body


def test_a_staked_verifier_reports_a_decision_listed_back_and_on_its_challenge(app_client, market) -> None:  # type: ignore[no-untyped-def]
    challenge = _job_challenge(app_client)
    verifier = _headers(app_client, 4)
    posted = app_client.post("/disputes/reports", json=_body(challenge), headers=verifier)
    assert posted.status_code == 201, posted.text
    row = posted.json()
    assert row["verifier"] == market.verifier.lower() and row["decision"] == "challenged"
    assert row["received_digests"] == [H, None] and row["tx_hashes"] == ["0x" + "cd" * 32]
    listed = app_client.get("/disputes/reports", params={"subject": challenge["subject"], "kind": "job",
                                                         "verifier": market.verifier}).json()
    assert [r["id"] for r in listed] == [row["id"]]
    assert app_client.get("/disputes/reports", params={"kind": "pog"}).json() == []
    shown = app_client.get(f"/challenges/{challenge['challenge_id']}").json()
    assert [r["id"] for r in shown["reports"]] == [row["id"]]


def test_reports_need_a_session_and_a_staked_verifier(app_client) -> None:  # type: ignore[no-untyped-def]
    body = _body(_job_challenge(app_client))
    assert app_client.post("/disputes/reports", json=body).status_code == 401
    refused = app_client.post("/disputes/reports", json=body, headers=_headers(app_client, UNSTAKED))
    assert refused.status_code == 403 and "not a staked verifier" in refused.json()["detail"]


@pytest.mark.parametrize("changes", [
    {"decision": "guessed"},
    {"kind": "lease"},
    {"expectedDigests": ["0x1234", H]},
    {"txHashes": ["not-a-hash"]},
    {"indices": list(range(1000)), "expectedDigests": [], "receivedDigests": []},
    {"detail": "x" * 5000},
    {"subject": -1},
    {"extra": 1},
    {"receivedDigests": [H]},  # not one per index
])
def test_malformed_reports_are_refused_with_a_reason(app_client, changes) -> None:  # type: ignore[no-untyped-def]
    response = app_client.post("/disputes/reports", json=_body(_job_challenge(app_client), **changes),
                               headers=_headers(app_client, 4))
    assert response.status_code in (400, 422), response.text
    assert response.json()["detail"]


def test_reports_survive_a_rebuild_from_events(app_client) -> None:  # type: ignore[no-untyped-def]
    challenge = _job_challenge(app_client)
    posted = app_client.post("/disputes/reports", json=_body(challenge, decision="settled"),
                             headers=_headers(app_client, 4)).json()
    rebuild(app_client.app.state.backend.make_indexer())
    ids = [r["id"] for r in app_client.get("/disputes/reports", params={"subject": challenge["subject"]}).json()]
    assert posted["id"] in ids
    assert posted["id"] in [r["id"] for r in app_client.get(f"/challenges/{challenge['challenge_id']}").json()["reports"]]


RFC3339 = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$"


def test_report_times_carry_their_zone_as_openapi_date_time_requires(app_client) -> None:  # type: ignore[no-untyped-def]
    import re

    challenge = _job_challenge(app_client)
    posted = app_client.post("/disputes/reports", json=_body(challenge, decision="settled"),
                             headers=_headers(app_client, 4))
    assert posted.status_code == 201, posted.text
    # Listed back from the database (SQLite drops the zone): still RFC 3339 with an offset.
    listed = app_client.get("/disputes/reports").json()
    assert listed and all(re.match(RFC3339, r["reported_at"]) for r in listed), [r["reported_at"] for r in listed]
    schema = app_client.get("/openapi.json").json()["components"]["schemas"]["DisputeReportPublic"]
    assert schema["properties"]["reported_at"]["format"] == "date-time"
