"""The HTTP API over an index of a real anvil market: reads, SIWE sessions, the model hub,
job specs, output uploads checked against the on-chain root, quotes, health and metrics."""

from __future__ import annotations

import base64
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import backend_support as support
import httpx
import pytest
from eth_account.messages import encode_defunct
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend import models as m
from backend.api.app import create_app
from backend.errors import NotFound
from client.backend_http import ApiError, BackendRefused
from renter.cli import signed_result_note
from renter.client import BackendClient
from renter.errors import RenterError
from tests.support.waiting import wait_until
from renter.orders import trusted_root
from renter.slash import slash_job
from renter.wallet import Wallet
from client.contracts import emitted
from client.escrow_jobs import read_job
from protocol.job_result import EscrowDomain, JobResult, JobResultError, NotSlashable, SignedJobResult
from protocol.jobs import JobSpec
from protocol.merkle import InvalidProof, MerkleTree, keccak256, leaf_hash, verify_inclusion
from protocol.siwe import SiweMessage


@pytest.fixture(scope="module")
def app_client(chain, market, tmp_path_factory):  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path_factory.mktemp("api"), max_model_bytes=4096)
    with TestClient(create_app(settings)) as client:
        client.app.state.backend.make_indexer().sync()
        yield client


def _sync(client: TestClient) -> None:
    client.app.state.backend.make_indexer().sync()


ZERO = "0x" + "00" * 20
UNSTAKED = 8  # an anvil account that never stakes here: not a verifier


def _as(client: TestClient, index: int) -> BackendClient:
    return BackendClient(client, support.anvil_key(index))


def _verified(client: BackendClient, session: Any, job_id: int) -> list[bytes]:
    """The renter's download: each item checked against the root the chain holds, else the one
    the job's provider (on-chain) signed."""
    job = read_job(session.contract("JobEscrow"), job_id)
    signed = client.verified_signed_result(job, session.escrow_domain(), client.get(f"/jobs/{job_id}/result"))
    return client.download_verified(job_id, *trusted_root(job, signed))


def test_providers_show_verified_class_prices_and_reputation(app_client, market) -> None:  # type: ignore[no-untyped-def]
    providers = {p["address"]: p for p in app_client.get("/providers").json()}
    a = providers[market.provider.lower()]
    assert a["gpu_class"] == "H100-SXM" and a["tflops"] == 710.0 and a["pog_passed"] is True
    assert a["price_per_gpu_hour"] == str(9 * 10**15) and a["stake_bonded"] == str(4 * 10**18)  # slashed once
    assert a["challenges_lost"] == 1 and a["reputation"] == round(1 / 3, 4)
    verified = app_client.get("/providers", params={"verified": True}).json()
    assert [p["address"] for p in verified] == [market.provider.lower()]
    one = app_client.get(f"/providers/{market.provider2}")
    assert one.status_code == 200 and one.json()["gpu_count"] == 2
    assert app_client.get("/providers/0x" + "11" * 20).status_code == 404
    assert app_client.get("/providers/not-an-address").status_code == 422


def test_pog_history_per_provider(app_client, market) -> None:  # type: ignore[no-untyped-def]
    rounds = app_client.get("/pog/rounds", params={"provider": market.provider}).json()
    assert [r["round_id"] for r in rounds] == [3, 1]
    assert app_client.get(f"/providers/{market.provider}/pog").json()[0]["tflops_milli"] == 710_000
    assert app_client.get("/pog/rounds/2").json()["passed"] is False


def test_jobs_leases_disputes_and_challenges_are_listed(app_client, market) -> None:  # type: ignore[no-untyped-def]
    job = app_client.get("/jobs/1").json()
    assert job["status"] == "finalized" and job["renter"] == market.renter.lower()
    assert int(job["provider_amount"]) + int(job["fee"]) == int(job["price"])
    assert [j["job_id"] for j in app_client.get("/jobs", params={"status": "refunded"}).json()] == [3, 2]
    assert app_client.get("/leases").json()[0]["status"] == "ended"
    assert app_client.get("/challenges", params={"kind": "pog"}).json()[0]["k"] == 32
    [challenge] = app_client.get("/challenges", params={"kind": "job"}).json()
    assert challenge["status"] == "provider_faulted" and challenge["subject"] == 3
    [dispute] = app_client.get("/disputes").json()
    assert dispute["verdict"] == "provider_at_fault" and dispute["votes"] == 2
    assert app_client.get(f"/disputes/{dispute['dispute_id']}").json() == dispute
    assert app_client.get("/jobs/99999").status_code == 404


def test_sign_in_with_ethereum_and_replay_is_rejected(app_client) -> None:  # type: ignore[no-untyped-def]
    key = support.anvil_key(3)
    issued = app_client.get("/auth/nonce").json()
    now = datetime.now(UTC).replace(microsecond=0)
    message = SiweMessage(issued["domain"], key.address, issued["uri"], issued["chain_id"], issued["nonce"],
                          now, now + timedelta(minutes=5)).text()
    signature = key.sign_message(encode_defunct(text=message)).signature.hex()
    login = app_client.post("/auth/login", json={"message": message, "signature": signature})
    assert login.status_code == 200
    token = login.json()["token"]
    me = app_client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["address"] == key.address.lower()
    replay = app_client.post("/auth/login", json={"message": message, "signature": signature})
    assert replay.status_code == 401 and "already used" in replay.json()["detail"]


@pytest.mark.parametrize("change, expected", [
    ("expired", "expired"),
    ("domain", "not testserver"),
    ("signer", "not by the message's address"),
    ("nonce", "nonce is unknown"),
    ("chain", "chain 1,"),
])
def test_sign_in_rejects_bad_messages(app_client, change, expected) -> None:  # type: ignore[no-untyped-def]
    key, other = support.anvil_key(3), support.anvil_key(4)
    issued = app_client.get("/auth/nonce").json()
    now = datetime.now(UTC).replace(microsecond=0)
    fields = dict(domain=issued["domain"], address=key.address, uri=issued["uri"], chain_id=issued["chain_id"],
                  nonce=issued["nonce"], issued_at=now - timedelta(minutes=10),
                  expiration_time=now + timedelta(minutes=5))
    if change == "expired":
        fields["expiration_time"] = now - timedelta(seconds=1)
    elif change == "domain":
        fields["domain"] = "evil.example"
    elif change == "nonce":
        fields["nonce"] = "0123456789abcdef"
    elif change == "chain":
        fields["chain_id"] = 1
    message = SiweMessage(**fields).text()
    signer = other if change == "signer" else key
    signature = signer.sign_message(encode_defunct(text=message)).signature.hex()
    response = app_client.post("/auth/login", json={"message": message, "signature": signature})
    assert response.status_code == 401 and expected in response.json()["detail"]


def test_uploads_require_a_session(app_client) -> None:  # type: ignore[no-untyped-def]
    assert app_client.post("/models", params={"name": "m"}, content=b"x").status_code == 401
    assert app_client.post("/inputs", content=b"x", headers={"Authorization": "Bearer forged"}).status_code == 401


def test_several_inputs_are_uploaded_in_one_request(app_client) -> None:  # type: ignore[no-untyped-def]
    renter = _as(app_client, 3)
    items = [b"batch-input-%d" % i for i in range(5)] + [b"batch-input-0"]  # the same bytes twice: one id
    sent: list[str] = []
    app_client.event_hooks["request"].append(lambda request: sent.append(f"{request.method} {request.url.path}"))
    try:
        ids = renter.upload_inputs(items)
    finally:
        app_client.event_hooks["request"].pop()
    assert ids == ["0x" + keccak256(data).hex() for data in items]
    assert [s for s in sent if "/inputs" in s] == ["POST /inputs/batch"]
    for content_hash, data in zip(ids, items):  # held by their uploader, as one by one
        assert renter.http.get(f"/inputs/{content_hash}", headers=renter._auth()).content == data
    # Bytes stored already: uploaded again by their owner, and by another renter who then holds them too.
    assert renter.upload_inputs(items[:3]) == ids[:3]
    other = _as(app_client, 4)
    assert other.http.get(f"/inputs/{ids[1]}", headers=other._auth()).status_code == 403
    again = other.upload_inputs([items[1], b"batch-input-new", items[1]])
    assert again == [ids[1], "0x" + keccak256(b"batch-input-new").hex(), ids[1]]
    for content_hash, data in ((ids[1], items[1]), (again[1], b"batch-input-new")):
        assert other.http.get(f"/inputs/{content_hash}", headers=other._auth()).content == data
    assert renter.http.get(f"/inputs/{again[1]}", headers=renter._auth()).status_code == 403

    def post(body: Any, who: BackendClient | None = renter) -> Any:  # type: ignore[type-arg]
        return app_client.post("/inputs/batch", json=body, headers=who._auth() if who else {})

    assert post({"items": [base64.b64encode(b"x").decode()]}, who=None).status_code == 401
    for junk, words in (({"items": []}, "items"), ({"items": ["not base64!"]}, "item 0"),
                        ({"items": [base64.b64encode(b"ok").decode(), ""]}, "empty"), ({"items": [5]}, "items.0")):
        refused = post(junk)
        assert refused.status_code == 422 and words in refused.json()["detail"], refused.json()
        assert "\n" not in refused.json()["detail"]
    too_big = post({"items": [base64.b64encode(bytes(3 << 20)).decode()] * 2})
    assert too_big.status_code == 413 and "limit is" in too_big.json()["detail"]

    # The client keeps each request within the body limit: an item too large for it goes alone.
    sent.clear()
    mixed = [b"a", b"b", bytes(3 << 20), b"c", b"d"]
    app_client.event_hooks["request"].append(lambda request: sent.append(f"{request.method} {request.url.path}"))
    try:
        assert renter.upload_inputs(mixed) == ["0x" + keccak256(data).hex() for data in mixed]
    finally:
        app_client.event_hooks["request"].pop()
    assert [s for s in sent if "/inputs" in s] == ["POST /inputs/batch", "POST /inputs", "POST /inputs/batch"]


def test_inputs_go_one_by_one_to_a_backend_without_the_batch_route(app_client) -> None:  # type: ignore[no-untyped-def]
    sent: list[str] = []

    def earlier_version(request: httpx.Request) -> httpx.Response:
        """This backend, but for the batch route, answered as FastAPI answers a route it lacks."""
        sent.append(f"{request.method} {request.url.path}")
        if request.url.path == "/inputs/batch":
            return httpx.Response(405, json={"detail": "Method Not Allowed"})
        return app_client.send(request)

    http = httpx.Client(base_url=app_client.base_url, transport=httpx.MockTransport(earlier_version))
    renter = BackendClient(http, support.anvil_key(3))
    ids = renter.upload_inputs([b"old-backend-0", b"old-backend-1"])
    assert ids == ["0x" + keccak256(b"old-backend-%d" % i).hex() for i in range(2)]
    assert [s for s in sent if "/inputs" in s] == ["POST /inputs/batch", "POST /inputs", "POST /inputs"]


def test_private_model_is_visible_only_to_its_owner(app_client) -> None:  # type: ignore[no-untyped-def]
    owner, stranger = _as(app_client, 3), _as(app_client, 4)
    public_bytes, private_bytes = support.Tagged.torchscript(1.0), support.Tagged.onnx(2.0)
    public = owner.push_model(public_bytes, "resnet", "torchscript", private=False)
    private = owner.push_model(private_bytes, "secret-net", "onnx", private=True)
    assert public["content_hash"] == "0x" + keccak256(public_bytes).hex()
    mine = {x["content_hash"] for x in owner.get("/models")}
    theirs = {x["content_hash"] for x in stranger.get("/models")}
    anonymous = {x["content_hash"] for x in app_client.get("/models").json()}
    assert private["content_hash"] in mine and private["content_hash"] not in theirs | anonymous
    assert public["content_hash"] in theirs and public["content_hash"] in anonymous
    hidden = app_client.get(f"/models/{private['content_hash']}/content",
                            headers={"Authorization": f"Bearer {stranger.token}"})
    assert hidden.status_code == 404
    shown = app_client.get(f"/models/{private['content_hash']}/content",
                           headers={"Authorization": f"Bearer {owner.token}"})
    assert shown.content == private_bytes


def test_oversized_upload_gets_413_with_the_limit(app_client) -> None:  # type: ignore[no-untyped-def]
    owner = _as(app_client, 3)
    with pytest.raises(ApiError) as caught:
        owner.push_model(b"x" * 5000, "big", "torchscript", private=False)
    assert caught.value.status == 413 and "limit is 4096" in caught.value.detail


def test_malformed_job_spec_gets_422_naming_the_field(app_client) -> None:  # type: ignore[no-untyped-def]
    spec = JobSpec(model="0x" + "ab" * 32, model_format="onnx", inputs=("0x" + "cd" * 32,), batch_size=1,
                   tolerance_ppm=0, deadline=2**40, price_wei=1, provider="0x" + "11" * 20)
    doc = json.loads(spec.canonical())
    doc["inputs"] = ["nope"]
    response = app_client.post("/jobs/specs", content=json.dumps(doc), headers={"Content-Type": "application/json"})
    assert response.status_code == 422 and "inputs[0]" in response.json()["detail"]
    assert app_client.post("/jobs/specs", content=b"{not json").status_code == 422


def _committed_job(app_client, session, market, renter: BackendClient, inputs: list[bytes],  # type: ignore[no-untyped-def]
                   outputs: list[bytes]) -> tuple[JobSpec, int, MerkleTree]:
    """A job over the renter's `inputs`, funded for the market's provider, its `outputs` committed
    on-chain (none uploaded) and indexed."""
    spec = JobSpec(model="0x" + keccak256(b"public-model").hex(), model_format="torchscript",
                   inputs=tuple(renter.upload_input(data) for data in inputs), batch_size=1,
                   tolerance_ppm=0, deadline=session.now() + 3600, price_wei=10**15, provider=market.provider)
    renter.store_spec(spec.canonical())
    job_id = support.funded_job(session, market.renter, market.provider, spec.spec_hash, 10**15)
    tree = support.commit_outputs(session, market.provider, job_id, outputs)
    _sync(app_client)
    return spec, job_id, tree


def test_several_outputs_are_uploaded_in_one_request_all_or_nothing(app_client, session, market) -> None:  # type: ignore[no-untyped-def]
    renter, provider, stranger = _as(app_client, 3), _as(app_client, 1), _as(app_client, UNSTAKED)
    outputs = [b"bulk-output-%d" % i for i in range(3)]
    _, job_id, tree = _committed_job(app_client, session, market, renter, [b"bulk-%d" % i for i in range(3)], outputs)
    provider.sign_in()
    stranger.sign_in()

    def put(who: BackendClient, items: list[tuple[int, bytes, tuple]]) -> Any:  # type: ignore[type-arg]
        body = {"items": [{"index": i, "data": base64.b64encode(d).decode(), "proof": ["0x" + p.hex() for p in proof]}
                          for i, d, proof in items]}
        return app_client.put(f"/jobs/{job_id}/outputs", json=body, headers=who._auth())

    items = [(i, data, tuple(tree.proof(i))) for i, data in enumerate(outputs)]
    forged = put(provider, [items[0], (1, b"forged", items[1][2]), items[2]])
    assert forged.status_code == 422 and "item 1" in forged.json()["detail"]
    assert all(item["digest"] is None for item in app_client.get(f"/jobs/{job_id}/result").json()["items"])
    assert put(stranger, items).status_code == 403
    for junk in ({"items": [{"index": 0, "data": "not base64!"}]}, {"items": [{"index": "x", "data": 5}]}):
        refused = app_client.put(f"/jobs/{job_id}/outputs", json=junk, headers=provider._auth())
        assert refused.status_code == 422 and "\n" not in refused.json()["detail"], refused.json()
    assert app_client.put(f"/jobs/{job_id}/outputs", json={"items": []}, headers=provider._auth()).status_code == 422
    first = put(provider, [items[1]])  # one stored before the rest: the batch stores it once
    assert first.status_code == 201
    stored = put(provider, [*items, items[2]])  # an index given twice is one row
    assert stored.status_code == 201 and [row["index"] for row in stored.json()] == [0, 1, 2, 2]
    assert _verified(renter, session, job_id) == outputs


def test_a_jobs_outputs_and_inputs_are_read_several_in_one_request(app_client, session, market,
                                                                   monkeypatch) -> None:  # type: ignore[no-untyped-def]
    renter, provider, verifier = _as(app_client, 3), _as(app_client, 1), _as(app_client, 4)
    stranger = _as(app_client, UNSTAKED)
    inputs, outputs = [b"page-input-%d" % i for i in range(4)], [b"page-output-%d" % i for i in range(4)]
    spec, job_id, tree = _committed_job(app_client, session, market, renter, inputs, outputs)
    for i in (0, 1, 3):  # item 2 is not uploaded
        provider.upload_output(job_id, i, outputs[i], tree.proof(i))
    for who in (renter, verifier, stranger):
        who.sign_in()

    def get(who: BackendClient, what: str, *indices: int) -> Any:
        return app_client.get(f"/jobs/{job_id}/{what}", params={"index": list(indices)}, headers=who._auth())

    for who in (renter, provider, verifier):  # whoever reads them one by one
        page = get(who, "outputs").json()
        assert [item["index"] for item in page["items"]] == [0, 1, 3]
        assert page["missing"] == [2] and page["left"] == []
        for item in page["items"]:  # each proves its place under the committed root
            data = base64.b64decode(item["data"])
            assert data == outputs[item["index"]]
            verify_inclusion(leaf_hash(keccak256(data)), item["index"], 4,
                             [bytes.fromhex(p[2:]) for p in item["proof"]], tree.root)
    assert [item["index"] for item in get(verifier, "outputs", 3, 1).json()["items"]] == [1, 3]
    assert get(stranger, "outputs").status_code == 403
    for bad in ((4,), (-1,), tuple(range(257))):
        refused = get(verifier, "outputs", *bad)
        assert refused.status_code == 422 and "index" in refused.json()["detail"]

    for who in (provider, verifier):  # those who run the job's model
        page = get(who, "inputs", 0, 2, 3).json()
        assert [(item["index"], item["content_hash"], base64.b64decode(item["data"])) for item in page["items"]] == \
            [(i, spec.inputs[i], inputs[i]) for i in (0, 2, 3)]
    assert get(renter, "inputs").status_code == 403 and get(stranger, "inputs").status_code == 403

    # An answer holds at least one item and stays within its bound; the rest is left to ask for.
    monkeypatch.setattr("backend.jobs.PAGE_BYTES", len(inputs[0]) + 1)
    first = get(verifier, "inputs").json()
    assert [item["index"] for item in first["items"]] == [0] and first["left"] == [1, 2, 3]
    assert [item["index"] for item in get(verifier, "outputs", 1, 3).json()["items"]] == [1]


def test_outputs_are_accepted_only_under_the_onchain_root(app_client, session, market) -> None:  # type: ignore[no-untyped-def]
    renter, provider, stranger = _as(app_client, 3), _as(app_client, 1), _as(app_client, UNSTAKED)
    verifier = _as(app_client, 4)  # staked at least the verifiers' minimum: it audits jobs
    inputs = [renter.upload_input(b"item-%d" % i) for i in range(3)]
    spec = JobSpec(model="0x" + keccak256(b"public-model").hex(), model_format="torchscript",
                   inputs=tuple(inputs), batch_size=2, tolerance_ppm=0, deadline=session.now() + 3600,
                   price_wei=10**15, provider=market.provider)
    stored = renter.store_spec(spec.canonical())
    assert stored["spec_hash"] == "0x" + spec.spec_hash.hex()
    job_id = support.funded_job(session, market.renter, market.provider, spec.spec_hash, 10**15)
    outputs = [b"output-%d" % i for i in range(3)]
    tree = support.commit_outputs(session, market.provider, job_id, outputs)
    _sync(app_client)
    assert app_client.get(f"/jobs/{job_id}").json()["spec"]["inputs"] == inputs
    # The provider can fetch the inputs its job names; a stranger cannot.
    assert provider.http.get(f"/inputs/{inputs[0]}", headers=provider._auth()).content == b"item-0"
    with pytest.raises(ApiError) as caught:
        stranger.get(f"/inputs/{inputs[0]}")
    assert caught.value.status == 403
    with pytest.raises(ApiError) as caught:  # right proof, wrong bytes
        provider.upload_output(job_id, 0, b"forged", tree.proof(0))
    assert caught.value.status == 422 and "output root" in caught.value.detail
    blobs = app_client.app.state.backend.blobs  # rejected bytes leave nothing behind
    assert list((blobs.root / "incoming").iterdir()) == []
    with pytest.raises(NotFound):
        blobs.path("0x" + keccak256(b"forged").hex())
    with pytest.raises(ApiError) as caught:  # right bytes, another item's position
        provider.upload_output(job_id, 1, outputs[0], tree.proof(0))
    assert caught.value.status == 422
    with pytest.raises(ApiError) as caught:
        stranger.upload_output(job_id, 0, outputs[0], tree.proof(0))
    assert caught.value.status == 403
    for i, data in enumerate(outputs):
        provider.upload_output(job_id, i, data, tree.proof(i))
    result = app_client.get(f"/jobs/{job_id}/result").json()
    assert result["output_root"] == "0x" + tree.root.hex() and result["item_count"] == 3
    assert _verified(renter, session, job_id) == outputs
    assert _verified(verifier, session, job_id) == outputs
    with pytest.raises(ApiError):
        _verified(stranger, session, job_id)


def _signed(job_id: int, outputs: list[bytes], signer_index: int, domain: EscrowDomain) -> dict:  # type: ignore[type-arg]
    tree = MerkleTree([leaf_hash(keccak256(o)) for o in outputs])
    result = JobResult(job_id, "0x" + tree.root.hex(), len(outputs), "0x" + keccak256(b"".join(outputs)).hex(),
                       1)  # commitBy long before any deadline: binding
    return SignedJobResult.sign(result, domain, support.anvil_key(signer_index)).to_json()


def test_signed_result_reaches_the_renter_before_the_commit_and_a_different_commit_is_recorded(
        app_client, session, market, chain) -> None:  # type: ignore[no-untyped-def]
    renter, provider, other = _as(app_client, 3), _as(app_client, 1), _as(app_client, 2)
    backend = app_client.app.state.backend
    domain = backend.chain().escrow_domain()
    job_id = support.funded_job(session, market.renter, market.provider, keccak256(b"signed-first"), 10**15)
    _sync(app_client)
    outputs = [b"signed-%d" % i for i in range(3)]
    tree = MerkleTree([leaf_hash(keccak256(o)) for o in outputs])
    assert app_client.get(f"/jobs/{job_id}/result").status_code == 409  # nothing yet

    def deliver(who: BackendClient, body: dict) -> int:  # type: ignore[type-arg]
        return who.http.put(f"/jobs/{job_id}/signed-result", json=body, headers=who._auth()).status_code

    # Forged: signed by someone else (even naming the provider), sent by the provider: refused.
    forged = {**_signed(job_id, outputs, 3, domain), "provider": market.provider}
    assert deliver(provider, forged) == 403
    # Signed under another domain (another escrow): recovers to somebody else, refused.
    elsewhere = EscrowDomain(domain.chain_id, "0x" + "11" * 20)
    assert deliver(provider, _signed(job_id, outputs, 1, elsewhere)) == 403
    # The provider's real signature, but sent by another account's session: refused.
    genuine = _signed(job_id, outputs, 1, domain)
    shown = {**genuine, "provider": market.provider.lower(), "binding": True}  # addresses shown lower-case
    assert deliver(other, genuine) == 403
    assert deliver(provider, {**genuine, "signature": "0x" + "00" * 65}) == 422  # recovers to nobody
    assert app_client.get(f"/jobs/{job_id}").json()["result_available_at"] is None

    assert deliver(provider, genuine) == 200
    assert deliver(provider, genuine) == 200  # idempotent
    assert deliver(provider, _signed(job_id, outputs[:2], 1, domain)) == 422  # a second, different result
    for i, data in enumerate(outputs):  # checked against the signed root: nothing is on-chain yet
        provider.upload_output(job_id, i, data, tree.proof(i))
    result = app_client.get(f"/jobs/{job_id}/result").json()
    assert result["committed"] is False and result["output_root"] == "0x" + tree.root.hex()
    assert result["signed"] == shown and result["result_available_at"] is not None
    assert _verified(renter, session, job_id) == outputs
    assert SignedJobResult.from_json(result["signed"]).signer(domain) == genuine["provider"]
    # The renter's client checks the signature itself: a server showing another's signature is caught.
    job = read_job(session.contract("JobEscrow"), job_id)
    assert renter.verified_signed_result(job, domain, result).result.output_root == "0x" + tree.root.hex()
    with pytest.raises(JobResultError, match="not signed by its provider"):
        renter.verified_signed_result(job, domain, {**result, "signed": forged})

    # The provider commits something else: the commit is the root from now on, the difference
    # is recorded and shown (the renter slashes with the signature above).
    support.commit_outputs(session, market.provider, job_id, [b"other"] * 3)
    _sync(app_client)
    result = app_client.get(f"/jobs/{job_id}/result").json()
    assert result["committed"] is True and result["output_root"] != "0x" + tree.root.hex()
    assert result["commit_matches_signed"] is False and result["signed"] == shown
    assert app_client.get(f"/jobs/{job_id}").json()["commit_matches_signed"] is False

    # `unchained job slash`: the renter slashes with the signature; the provider is not paid for
    # the job (its price back to the renter), and the index shows the job refunded.
    escrow, staking = session.contract("JobEscrow"), session.contract("Staking")
    stake, owed = staking.functions.stakeOf(market.provider).call(), escrow.functions.owedTo(ZERO, market.renter).call()
    wallet = Wallet(chain[0].rpc_url, support.anvil_key(3), chain[2])
    said = slash_job(wallet, renter, job_id)
    assert "slashed" in said and "not the signed root" in said and "credited back" in said
    minimum = session.contract("ProviderRegistry").functions.minProviderStake().call()
    assert staking.functions.stakeOf(market.provider).call() == stake - minimum
    assert escrow.functions.owedTo(ZERO, market.renter).call() == owed + 10**15
    _sync(app_client)
    assert app_client.get(f"/jobs/{job_id}").json()["status"] == "refunded"
    with pytest.raises(NotSlashable, match="already slashed"):
        slash_job(wallet, renter, job_id)


def test_the_signed_result_and_its_outputs_arrive_in_one_request(app_client, session, market) -> None:  # type: ignore[no-untyped-def]
    renter, provider = _as(app_client, 3), _as(app_client, 1)
    domain = app_client.app.state.backend.chain().escrow_domain()
    outputs = [b"together-%d" % i for i in range(3)]
    tree = MerkleTree([leaf_hash(keccak256(o)) for o in outputs])

    def items(which: list[int], data: list[bytes] = outputs) -> list[dict]:  # type: ignore[type-arg]
        return [{"index": i, "data": base64.b64encode(data[i]).decode(),
                 "proof": ["0x" + p.hex() for p in tree.proof(i)]} for i in which]

    def deliver(job_id: int, body: dict) -> httpx.Response:  # type: ignore[type-arg]
        return provider.http.put(f"/jobs/{job_id}/signed-result", json=body, headers=provider._auth())

    job_id = support.funded_job(session, market.renter, market.provider, keccak256(b"together"), 10**15)
    _sync(app_client)
    answer = deliver(job_id, {**_signed(job_id, outputs, 1, domain), "outputs": items([0, 1, 2])})
    assert answer.status_code == 200
    assert [o["index"] for o in answer.json()["outputs"]] == [0, 1, 2]
    assert app_client.get(f"/jobs/{job_id}/result").json()["committed"] is False
    assert _verified(renter, session, job_id) == outputs  # the renter has everything after one request

    # An output that is not under the signed root: refused, none of the delivery's outputs stored,
    # while the signed result (valid on its own) is kept.
    other = support.funded_job(session, market.renter, market.provider, keccak256(b"together-2"), 10**15)
    _sync(app_client)
    forged = items([0, 1], [outputs[0], b"forged", outputs[2]])
    answer = deliver(other, {**_signed(other, outputs, 1, domain), "outputs": forged})
    assert answer.status_code == 422 and "item 1" in answer.json()["detail"]
    result = app_client.get(f"/jobs/{other}/result").json()
    assert result["signed"] is not None and all(item["digest"] is None for item in result["items"])
    # Without outputs it is the plain delivery; too large a body is refused before it is read whole.
    assert deliver(other, _signed(other, outputs, 1, domain)).json()["outputs"] == []
    huge = {**_signed(other, outputs, 1, domain), "outputs": [{"index": 0, "data": "A" * (5 << 20), "proof": []}]}
    assert deliver(other, huge).status_code == 413


def test_a_long_poll_answers_when_the_signed_result_arrives(app_client, session, market) -> None:  # type: ignore[no-untyped-def]
    """GET /jobs/{id}/result?wait=S waits while the job is not indexed and while it has no result,
    and answers as soon as the provider's signed result is stored, not at the end of the wait."""
    provider = _as(app_client, 1)
    backend = app_client.app.state.backend
    domain = backend.chain().escrow_domain()
    outputs = [b"long-poll"]
    job_id = support.funded_job(session, market.renter, market.provider, keccak256(b"long-poll"), 10**15)
    answers: list[tuple[httpx.Response, float]] = []

    def renter_waits() -> None:
        response = app_client.get(f"/jobs/{job_id}/result", params={"wait": 20})
        answers.append((response, time.monotonic()))

    waiter = threading.Thread(target=renter_waits)
    waiter.start()
    try:
        wait_until(lambda: backend.signals.waiting() == 1, 10, "the renter's request waits")
        _sync(app_client)  # JobCreated indexed: the waiter looks again, finds no result, keeps waiting
        wait_until(lambda: app_client.get(f"/jobs/{job_id}").status_code == 200, 10, "the job is indexed")
        assert not answers
        delivered = provider.http.put(f"/jobs/{job_id}/signed-result", json=_signed(job_id, outputs, 1, domain),
                                      headers=provider._auth())
        stored_at = time.monotonic()
        assert delivered.status_code == 200
    finally:
        waiter.join(30)
    response, answered_at = answers[0]
    assert response.status_code == 200 and response.json()["signed"]["jobId"] == job_id
    assert answered_at - stored_at < 5  # woken by the delivery, far inside the 20 s it would wait
    assert backend.signals.waiting() == 0

    # A wait that runs out answers as the plain request would; a wait past the bound is refused.
    other = support.funded_job(session, market.renter, market.provider, keccak256(b"long-poll-2"), 10**15)
    _sync(app_client)
    began = time.monotonic()
    assert app_client.get(f"/jobs/{other}/result", params={"wait": 0.3}).status_code == 409
    assert time.monotonic() - began >= 0.3
    assert app_client.get(f"/jobs/{other}/result", params={"wait": 31}).status_code == 422


def test_client_rejects_an_output_that_does_not_match_the_root(app_client, session, market) -> None:  # type: ignore[no-untyped-def]
    renter = _as(app_client, 3)
    job_id = max(j["job_id"] for j in app_client.get("/jobs", params={"renter": market.renter}).json()
                 if j["status"] == "committed")
    backend = app_client.app.state.backend
    with backend.factory.begin() as db:  # a server that lies about a stored file
        row = db.scalars(select(m.JobOutput).where(m.JobOutput.job_id == job_id)).first()
        row.digest = backend.blobs.put(b"tampered")
    with pytest.raises(InvalidProof):
        _verified(renter, session, job_id)


def test_a_forged_self_consistent_result_from_the_backend_is_not_verified(app_client, session, market) -> None:  # type: ignore[no-untyped-def]
    """A compromised backend (its database rewritten) serves a committed job's result under a root
    of its own, with outputs and proofs that all agree with that root. The renter must check
    against the chain's root, not the one served beside the items."""
    renter = _as(app_client, 3)
    outputs = [b"true-%d" % i for i in range(3)]
    _, job_id, _ = _committed_job(app_client, session, market, renter, [b"forge-in-%d" % i for i in range(3)], outputs)
    forged = [b"forged-%d" % i for i in range(3)]
    tree = MerkleTree([leaf_hash(keccak256(o)) for o in forged])
    backend = app_client.app.state.backend
    with backend.factory.begin() as db:
        db.get(m.Job, job_id).output_root = "0x" + tree.root.hex()
        for i, data in enumerate(forged):
            db.add(m.JobOutput(job_id=job_id, item_index=i, digest=backend.blobs.put(data), size=len(data),
                               proof=["0x" + p.hex() for p in tree.proof(i)]))
    served = app_client.get(f"/jobs/{job_id}/result").json()
    assert served["output_root"] == "0x" + tree.root.hex()  # the forgery is self-consistent
    with pytest.raises(JobResultError, match="serves root"):
        _verified(renter, session, job_id)


def test_quotes_rank_verified_providers_within_budget(app_client, session, market) -> None:  # type: ignore[no-untyped-def]
    assert app_client.post("/quotes", json={"items": 10}).json() == []  # slashed after its last passed round
    support.reverify(session, market)
    _sync(app_client)
    quotes = app_client.post("/quotes", json={"items": 10}).json()
    assert [q["provider"] for q in quotes] == [market.provider.lower()]  # provider2 failed PoG
    assert quotes[0]["price_wei"] == str(10 * 10**12)
    assert app_client.post("/quotes", json={"items": 10, "max_price_wei": "1"}).json() == []
    assert app_client.post("/quotes", json={"items": 10, "private": True}).json() == []
    provider = _as(app_client, 1)
    provider.http.put(f"/providers/{market.provider}/profile", json={"private_ok": True},
                      headers=provider._auth()).raise_for_status()
    assert len(app_client.post("/quotes", json={"items": 10, "private": True}).json()) == 1
    other = _as(app_client, 4)
    denied = other.http.put(f"/providers/{market.provider}/profile", json={}, headers=other._auth())
    assert denied.status_code == 403


def test_health_and_metrics(app_client) -> None:  # type: ignore[no-untyped-def]
    health = app_client.get("/health").json()
    assert health["status"] == "ok" and health["indexed_block"] == health["head_block"]
    text = app_client.get("/metrics").text
    assert 'unchained_http_requests_total{method="GET",route="/health",status="200"}' in text
    assert "unchained_indexer_block" in text
    assert app_client.get("/docs").status_code == 200
    assert "/jobs/{job_id}/result" in app_client.get("/openapi.json").json()["paths"]


def test_deployment_and_dashboard_scripts(app_client, chain) -> None:  # type: ignore[no-untyped-def]
    _, deployment, _ = chain
    served = app_client.get("/deployment").json()
    assert served["chain_id"] == deployment.chain_id
    assert served["contracts"]["JobEscrow"] == deployment.contract("JobEscrow").address
    page = app_client.get("/").text
    for name in ("keccak.js", "merkle.js", "eth.js", "dashboard.js"):
        assert f'src="/static/{name}"' in page
        script = app_client.get(f"/static/{name}")
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert app_client.get("/static/missing.js").status_code == 404
    for outside in ("..%2Fapp.py", "dashboard.html", "app.py"):  # only the folder's scripts
        assert app_client.get(f"/static/{outside}").status_code in (404, 422)


def test_blobs_serve_specs_and_public_models_openly_and_the_rest_to_the_jobs_provider(  # type: ignore[no-untyped-def]
        app_client, session, market) -> None:
    renter, provider, stranger = _as(app_client, 3), _as(app_client, 1), _as(app_client, UNSTAKED)
    verifier = _as(app_client, 4)  # staked at least the verifiers' minimum
    model_bytes = support.Tagged.onnx(3.0)
    private_model = renter.push_model(model_bytes, "p", "onnx", private=True)["content_hash"]
    item = renter.upload_input(b"blob-input")
    spec = JobSpec(model=private_model, model_format="onnx", inputs=(item,), batch_size=1, tolerance_ppm=0,
                   deadline=session.now() + 3600, price_wei=10**15, provider=market.provider)
    spec_hash = renter.store_spec(spec.canonical())["spec_hash"]
    # The spec is open, and its bytes hash to the specHash the escrow stores.
    raw = app_client.get(f"/blobs/{spec_hash}").content
    assert "0x" + keccak256(raw).hex() == spec_hash
    # Before any job names them, the private model and the input are the renter's alone.
    assert app_client.get(f"/blobs/{item}").status_code == 401
    for viewer, expected in ((provider, 404), (stranger, 404), (verifier, 404), (renter, 200)):
        assert app_client.get(f"/blobs/{item}", headers=viewer._auth()).status_code == expected
    support.funded_job(session, market.renter, market.provider, spec.spec_hash, 10**15)
    _sync(app_client)
    # Once a funded job names them, its provider and staked verifiers (who re-execute the job
    # to audit it) may read them; nobody else.
    assert app_client.get(f"/blobs/{private_model}", headers=provider._auth()).content == model_bytes
    assert app_client.get(f"/blobs/{item}", headers=provider._auth()).content == b"blob-input"
    assert app_client.get(f"/blobs/{private_model}", headers=verifier._auth()).content == model_bytes
    assert app_client.get(f"/blobs/{item}", headers=verifier._auth()).content == b"blob-input"
    assert app_client.get(f"/blobs/{private_model}", headers=stranger._auth()).status_code == 404
    # A competing provider has stake too, but it is no auditor: the private model stays hidden.
    competitor = _as(app_client, 2)
    assert app_client.get(f"/blobs/{private_model}", headers=competitor._auth()).status_code == 404


def test_a_job_naming_someone_elses_private_content_opens_nothing(app_client, session, market) -> None:  # type: ignore[no-untyped-def]
    """Specs are public and name their content's hashes: a provider who reads one may fund a job of
    its own (from another account, for itself) naming the victim's private model and inputs. That
    job must not open them: a job lends its provider only what its renter owns."""
    victim, provider, verifier = _as(app_client, 3), _as(app_client, 1), _as(app_client, 4)
    model_bytes = support.Tagged.onnx(5.0)
    private_model = victim.push_model(model_bytes, "secret", "onnx", private=True)["content_hash"]
    item = victim.upload_input(b"victim-input")
    spec = JobSpec(model=private_model, model_format="onnx", inputs=(item,), batch_size=1, tolerance_ppm=0,
                   deadline=session.now() + 3600, price_wei=10**15, provider=market.provider)
    accomplice = _as(app_client, UNSTAKED)  # the provider's own second account, as the job's renter
    accomplice.store_spec(spec.canonical())
    job_id = support.funded_job(session, support.anvil_key(UNSTAKED).address, market.provider, spec.spec_hash, 10**15)
    _sync(app_client)
    for reader in (provider, verifier, accomplice):
        for content in (private_model, item):
            assert app_client.get(f"/blobs/{content}", headers=reader._auth()).status_code == 404
    assert app_client.get(f"/inputs/{item}", headers=provider._auth()).status_code == 403
    page = app_client.get(f"/jobs/{job_id}/inputs", headers=provider._auth()).json()
    assert page["items"] == [] and page["missing"] == [0]


def test_provider_reports_failures_and_mining_yield(app_client, market) -> None:  # type: ignore[no-untyped-def]
    provider, stranger = _as(app_client, 1), _as(app_client, 4)
    body = {"jobId": 1, "kind": "bad-input", "error": "model does not load"}
    assert app_client.post("/jobs/1/failure", json=body, headers=stranger._auth()).status_code == 403
    assert app_client.post("/jobs/1/failure", json=body, headers=provider._auth()).status_code == 204
    assert app_client.get("/jobs/1").json()["failure"] == "bad-input: model does not load"
    report = {"miningYieldWeiPerGpuHour": "123456", "miner": "sha256d", "hashrate": 1.5e6}
    assert app_client.post(f"/providers/{market.provider}/mining", json=report,
                           headers=stranger._auth()).status_code == 403
    shown = app_client.post(f"/providers/{market.provider}/mining", json=report, headers=provider._auth()).json()
    assert shown["mining_floor_wei_per_hour"] == "123456" and shown["miner"] == "sha256d"


def test_mining_floor_falls_back_to_the_onchain_metadata(app_client, session, market) -> None:  # type: ignore[no-untyped-def]
    registry = session.contract("ProviderRegistry")
    uri = 'data:application/json,{"miningYieldWeiPerGpuHour":"777","miner":"sha256d","hashrate":1.0}'
    session.send(registry.functions.setMetadataURI(uri), market.provider2)
    _sync(app_client)
    assert app_client.get(f"/providers/{market.provider2}").json()["mining_floor_wei_per_hour"] == "777"


def test_client_refuses_to_sign_in_for_another_domain(chain, market, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path, siwe_domain="bank.example")
    with TestClient(create_app(settings)) as client:
        with pytest.raises(BackendRefused, match="bank.example"):
            BackendClient(client, support.anvil_key(3)).sign_in()


def test_model_times_carry_their_zone(app_client) -> None:  # type: ignore[no-untyped-def]
    import re

    _as(app_client, 3).push_model(support.Tagged.torchscript(3.0), "zoned", "torchscript", private=False)
    rows = app_client.get("/models").json()
    assert rows and all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$", r["created_at"])
                        for r in rows), [r["created_at"] for r in rows]
    schema = app_client.get("/openapi.json").json()["components"]["schemas"]["ModelPublic"]
    assert schema["properties"]["created_at"]["format"] == "date-time"


def test_docs_render_from_files_this_server_holds(app_client) -> None:  # type: ignore[no-untyped-def]
    import re

    page = app_client.get("/docs")
    assert page.status_code == 200
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets) and any(a.endswith(".css") for a in assets)
    # Nothing from another host (FastAPI's default loads Swagger UI from a CDN: blank offline).
    assert not re.search(r"https?://", page.text.replace("http://testserver", "")), page.text
    for asset in assets:
        fetched = app_client.get(asset)
        assert fetched.status_code == 200 and fetched.content, asset


def test_slashes_are_listed_with_their_amounts_rewards_and_causes(app_client, session, market) -> None:  # type: ignore[no-untyped-def]
    # The market's provider already lost a job dispute (a challenge slash); now it signs a result
    # and commits another one, and the renter slashes it with the signature.
    escrow, staking = session.contract("JobEscrow"), session.contract("Staking")
    domain = app_client.app.state.backend.chain().escrow_domain()
    session.send(staking.functions.stake(), market.provider, value=2 * 10**18)  # earlier tests slashed it below the minimum
    job_id = support.funded_job(session, market.renter, market.provider, keccak256(b"slashed-signed"), 10**15)
    signed = _signed(job_id, [b"promised"], 1, domain)
    support.commit_outputs(session, market.provider, job_id, [b"delivered"])
    receipt = session.send(escrow.functions.slashSignedResult(
        read_job(escrow, job_id).as_tuple(),
        (job_id, bytes.fromhex(signed["outputRoot"][2:]), 1, bytes.fromhex(signed["resultDigest"][2:]), signed["commitBy"]),
        bytes.fromhex(signed["signature"][2:])), market.renter)
    [event] = emitted(staking, "Slashed", receipt)
    _sync(app_client)

    slashes = app_client.get("/slashes").json()
    newest, older = slashes[0], next(s for s in slashes if s["cause"] == "challenge")
    assert newest == {"tx_hash": "0x" + bytes(receipt["transactionHash"]).hex(), "block_number": receipt["blockNumber"],
                      "offender": market.provider.lower(), "requested": str(event.args.requested),
                      "slashed": str(event.args.slashed), "reward_recipient": market.renter.lower(),
                      "reward": str(event.args.reward), "cause": "signed result", "job_id": job_id,
                      "challenge_id": None}
    assert int(newest["slashed"]) > 0 and 0 < int(newest["reward"]) < int(newest["slashed"])
    [job_challenge] = app_client.get("/challenges", params={"kind": "job"}).json()
    assert older["cause"] == "challenge" and older["challenge_id"] == job_challenge["challenge_id"]
    assert older["offender"] == market.provider.lower() and int(older["slashed"]) > 0 and older["job_id"] is None
    assert app_client.get("/slashes", params={"offender": market.provider2}).json() == []
    assert [s["job_id"] for s in app_client.get("/slashes", params={"offender": market.provider, "limit": 1}).json()] \
        == [job_id]
    assert app_client.get("/slashes", params={"offender": "nobody"}).status_code == 422


def test_the_renter_refuses_a_content_hash_the_backend_answers_for_other_bytes(app_client) -> None:  # type: ignore[no-untyped-def]
    """A compromised backend answers an upload with the hash of other content (a model or inputs
    of its choosing): the spec would name them, the job (paid for) would run them, and the
    outputs would verify against the commit of that wrong work. The renter names only what it
    hashed itself."""
    other = "0x" + keccak256(b"the backend's choice").hex()

    class Lying(BackendClient):
        def _call(self, method: str, path: str, signed: bool = False, **kwargs: Any) -> httpx.Response:
            response = super()._call(method, path, signed=signed, **kwargs)
            if method != "POST" or path not in ("/inputs", "/inputs/batch", "/models"):
                return response
            body = response.json()
            body = ([{**row, "content_hash": other} for row in body] if isinstance(body, list)
                    else {**body, "content_hash": other})
            return httpx.Response(response.status_code, json=body)

    lying = Lying(app_client, support.anvil_key(3))
    model = support.Tagged.torchscript(41.0)
    for upload in (lambda: lying.upload_input(b"mine"), lambda: lying.upload_inputs([b"item-a", b"item-b"]),
                   lambda: lying.push_model(model, "m.pt", "torchscript", True)):
        with pytest.raises(RenterError, match="hash to"):
            upload()
    honest = _as(app_client, 3)
    assert honest.upload_inputs([b"item-a", b"item-b"]) == ["0x" + keccak256(d).hex() for d in (b"item-a", b"item-b")]
    assert honest.push_model(model, "m.pt", "torchscript", True)["content_hash"] == "0x" + keccak256(model).hex()


def test_the_renter_judges_a_commit_against_its_signed_result_from_the_chain_not_the_backends_flag(
        app_client, session, market) -> None:  # type: ignore[no-untyped-def]
    """A backend siding with the provider rewrites `commit_matches_signed`: a commit that differs
    from the signed result shown as matching (the renter would let the slash and its refund pass),
    a matching one shown as differing. `job result`'s note reads the commit from the chain."""
    renter, provider = _as(app_client, 3), _as(app_client, 1)
    backend = app_client.app.state.backend
    domain = backend.chain().escrow_domain()
    escrow = session.contract("JobEscrow")
    notes = {}
    for name, committed in (("differs", [b"other"] * 3), ("matches", None)):
        outputs = [b"%s-%d" % (name.encode(), i) for i in range(3)]
        job_id = support.funded_job(session, market.renter, market.provider, keccak256(name.encode()), 10**15)
        _sync(app_client)
        assert provider.http.put(f"/jobs/{job_id}/signed-result", json=_signed(job_id, outputs, 1, domain),
                                 headers=provider._auth()).status_code == 200
        support.commit_outputs(session, market.provider, job_id, committed or outputs)
        _sync(app_client)
        with backend.factory.begin() as db:  # the lie
            db.get(m.Job, job_id).commit_matches_signed = committed is not None
        result = app_client.get(f"/jobs/{job_id}/result").json()
        assert result["commit_matches_signed"] is (committed is not None)
        job = read_job(escrow, job_id)
        notes[name] = signed_result_note(job, renter.verified_signed_result(job, domain, result))
    assert "`unchained job slash" in notes["differs"] and "another result" in notes["differs"]
    assert "committed as signed" in notes["matches"]
