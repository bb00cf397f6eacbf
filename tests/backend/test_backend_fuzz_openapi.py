"""Bad input never produces a server error: every operation of the OpenAPI schema is fed
schema-derived valid, boundary and malformed values, signed in and not (openapi_fuzz.py)."""

from __future__ import annotations

import json

import backend_support as support
import pytest
from fastapi.testclient import TestClient
from openapi_fuzz import Fuzzer

from backend.api.app import create_app
from renter.client import BackendClient

CASES_PER_OPERATION = 40


@pytest.fixture(scope="module")
def client(chain, market, tmp_path_factory):  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path_factory.mktemp("fuzz"), max_model_bytes=4096,
                                     max_input_bytes=4096, max_output_bytes=4096)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        c.app.state.backend.make_indexer().sync()
        yield c


def test_no_operation_answers_5xx_to_generated_requests(client) -> None:  # type: ignore[no-untyped-def]
    schema = client.get("/openapi.json").json()
    renter = BackendClient(client, support.anvil_key(3))
    token = renter.sign_in()
    renter.push_model(support.Tagged.onnx(4.0), "fuzz", "onnx", private=True)
    failures, seen = [], 0
    for case in Fuzzer(schema, seed=6).cases(CASES_PER_OPERATION, token):
        response = client.request(case.method, case.path, params=case.params, headers=case.headers,
                                  json=case.json_body if case.content is None else None, content=case.content)
        seen += 1
        if response.status_code >= 500:
            failures.append(f"{case.method} {case.path} {case.params} -> {response.status_code} {response.text[:200]}")
    operations = sum(len(methods) for methods in schema["paths"].values())
    assert seen == operations * CASES_PER_OPERATION and operations >= 25
    assert failures == [], "\n".join(failures[:20])


def test_fuzzer_reaches_past_validation(client) -> None:  # type: ignore[no-untyped-def]
    """The generated requests are not all rejected at the door: some succeed, some are refused
    by the domain layer (404/401/403/409/413), some by validation (422)."""
    schema = client.get("/openapi.json").json()
    statuses = set()
    for case in Fuzzer(schema, seed=7).cases(10, None):
        statuses.add(client.request(case.method, case.path, params=case.params, headers=case.headers,
                                    json=case.json_body if case.content is None else None,
                                    content=case.content).status_code)
    assert {200, 401, 404, 422} <= statuses, json.dumps(sorted(statuses))
