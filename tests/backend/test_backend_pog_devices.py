"""Each PoG round's devices as its verifier records them (PUT /pog/rounds/{id}/devices): NVML's
identity and the CC attestation outcome, shown with the round in the PoG history, only from the
round's own verifier, strict bodies, kept by a rebuild from events."""

from __future__ import annotations

import backend_support as support
import httpx
import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.indexer import rebuild
from renter.client import BackendClient
from tests.support.waiting import wait_until

VERIFIER, PROVIDER = 4, 1  # anvil accounts of backend_support.parties
H200 = {"gpu_index": 0, "name": "NVIDIA H200", "uuid": "GPU-8f6b2a4c-1d2e-4f50-9a6b-7c8d9e0f1a2b",
        "memory_bytes": 150_754_820_096, "serial": "1654123456789", "driver_version": "550.90.07",
        "cc_mode": "on", "attestation": "attested: GH100 board 1010-0200-882"}
CPU = {"gpu_index": 1, "attestation": "not reported"}


@pytest.fixture(scope="module")
def app_client(chain, market, tmp_path_factory):  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path_factory.mktemp("pog-devices"))
    with TestClient(create_app(settings)) as client:
        client.app.state.backend.make_indexer().sync()
        yield client


def _headers(client: TestClient, index: int) -> dict[str, str]:
    return BackendClient(client, support.anvil_key(index))._auth()


def _round(client: TestClient, market) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return client.get("/pog/rounds", params={"provider": market.provider}).json()[-1]


def _put(client: TestClient, round_id: int, devices: list, signer: int = VERIFIER):  # type: ignore[no-untyped-def,type-arg]
    return client.put(f"/pog/rounds/{round_id}/devices", json={"devices": devices}, headers=_headers(client, signer))


def test_the_rounds_verifier_records_devices_shown_in_the_pog_history(app_client, market) -> None:  # type: ignore[no-untyped-def]
    round_id = _round(app_client, market)["round_id"]
    put = _put(app_client, round_id, [H200, CPU])
    assert put.status_code == 200, put.text
    shown = app_client.get(f"/pog/rounds/{round_id}").json()["devices"]
    assert [{k: d[k] for k in H200} for d in shown[:1]] == [H200]
    assert shown[1]["name"] is None and shown[1]["attestation"] == "not reported"
    assert all(d["verifier"] == market.verifier.lower() for d in shown)
    history = app_client.get(f"/providers/{market.provider}/pog").json()
    assert next(r for r in history if r["round_id"] == round_id)["devices"] == shown
    listed = app_client.get("/pog/rounds").json()
    assert next(r for r in listed if r["round_id"] == round_id)["devices"] == shown
    # Sent again, the record is replaced, not added to.
    assert _put(app_client, round_id, [{**H200, "attestation": "failed: NonceMismatchError"}]).status_code == 200
    again = app_client.get(f"/pog/rounds/{round_id}").json()["devices"]
    assert [d["attestation"] for d in again] == ["failed: NonceMismatchError"]


def test_only_the_rounds_own_verifier_records_its_devices(app_client, market) -> None:  # type: ignore[no-untyped-def]
    round_id = _round(app_client, market)["round_id"]
    unsigned = app_client.put(f"/pog/rounds/{round_id}/devices", json={"devices": [H200]})
    assert unsigned.status_code == 401
    refused = _put(app_client, round_id, [H200], signer=PROVIDER)
    assert refused.status_code == 403
    assert f"belongs to verifier {market.verifier.lower()}" in refused.json()["detail"]
    assert _put(app_client, 10**9, [H200]).status_code == 404


@pytest.mark.parametrize("devices", [
    [],
    [{**H200, "cc_mode": "maybe"}],
    [{**H200, "name": "NVIDIA H200\n"}],
    [{**H200, "name": "N" * 97}],
    [{**H200, "serial": "S" * 31}],
    [{**H200, "memory_bytes": -1}],
    [{**H200, "gpu_index": 64}],
    [{**H200, "attestation": ""}],
    [{**H200, "attestation": "x" * 201}],
    [{**H200, "extra": 1}],
    [{k: v for k, v in H200.items() if k != "attestation"}],
    [H200, H200],  # one gpu_index twice
])
def test_malformed_device_records_are_refused_with_a_reason(app_client, market, devices) -> None:  # type: ignore[no-untyped-def]
    response = _put(app_client, _round(app_client, market)["round_id"], devices)
    assert response.status_code in (400, 422), response.text
    assert response.json()["detail"]


def test_device_records_survive_a_rebuild_from_events(app_client, market) -> None:  # type: ignore[no-untyped-def]
    round_id = _round(app_client, market)["round_id"]
    assert _put(app_client, round_id, [H200]).status_code == 200
    rebuild(app_client.app.state.backend.make_indexer())
    assert [d["uuid"] for d in app_client.get(f"/pog/rounds/{round_id}").json()["devices"]] == [H200["uuid"]]


def test_the_verifiers_client_records_a_judged_rounds_devices(server, market) -> None:  # type: ignore[no-untyped-def]
    from protocol.pog.identity import DeviceIdentity
    from verifier.backend_client import VerifierBackend
    from verifier.pog_checker import GpuVerdict

    round_id = wait_until(lambda: httpx.get(f"{server}/providers/{market.provider}/pog").json(), 30,
                          "the provider's PoG rounds are indexed")[-1]["round_id"]
    h200 = DeviceIdentity("NVIDIA H200", "GPU-77", 150_754_820_096, None, "550.90.07", "off")
    gpus = [GpuVerdict(0, True, "H200", 700.0, 32, identity=h200, attestation="not supported"),
            GpuVerdict(1, False, None, 0.0, 0, "no answers for this GPU")]
    backend = VerifierBackend(server, support.anvil_key(VERIFIER))
    assert backend.record_devices(round_id, gpus)
    shown = httpx.get(f"{server}/pog/rounds/{round_id}").json()["devices"]
    assert [(d["name"], d["serial"], d["cc_mode"], d["attestation"]) for d in shown] == [
        ("NVIDIA H200", None, "off", "not supported"), (None, None, None, "not reported")]
    # Best effort: a round that is not this verifier's is refused, logged, and returns False.
    assert not VerifierBackend(server, support.anvil_key(PROVIDER)).record_devices(round_id, gpus)
