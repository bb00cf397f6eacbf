"""Nothing unrunnable is funded: the hub refuses a model file that does not load (a text file
pushed as TorchScript, junk as ONNX, a file that crashes the loader), checked in a limited child
process; and the dry run that `job submit` asks for before paying runs the renter's own input
items through the model, so junk inputs or a model that refuses them are caught before money
moves."""

from __future__ import annotations

import backend_support as support
import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend import models as m
from backend.api.app import create_app
from renter.client import BackendClient
from backend.model_check import CheckLimits, ModelChecker
from client.backend_http import ApiError
from protocol.jobs import encode_output
from protocol.merkle import keccak256


@pytest.fixture(scope="module")
def app_client(chain, market, tmp_path_factory):  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path_factory.mktemp("checks"), model_check_timeout_s=30.0)
    with TestClient(create_app(settings)) as client:
        yield client


def _as(client: TestClient, index: int) -> BackendClient:
    return BackendClient(client, support.anvil_key(index))


def _stored(client: TestClient, data: bytes) -> bool:
    backend = client.app.state.backend
    with backend.factory() as db:
        listed = db.scalars(select(m.Model).where(m.Model.content_hash == "0x" + keccak256(data).hex())).first()
    return listed is not None


@pytest.mark.parametrize("data,fmt,words", [
    (b"this is a text file, not a model\n", "torchscript", "not a TorchScript archive"),
    (b"PK\x03\x04 a zip header and nothing else", "torchscript", "does not load"),
    (b"hello world\n", "onnx", "not an ONNX model"),
])
def test_a_file_that_does_not_load_is_refused_with_422_and_not_stored(app_client, data, fmt, words) -> None:  # type: ignore[no-untyped-def]
    owner = _as(app_client, 3)
    with pytest.raises(ApiError) as caught:
        owner.push_model(data, "junk", fmt, private=False)
    assert caught.value.status == 422 and words in caught.value.detail, caught.value.detail
    assert f"as a {fmt} model" in caught.value.detail
    assert not _stored(app_client, data)
    assert not list((app_client.app.state.backend.blobs.root / "incoming").iterdir())  # nothing left behind


def test_a_torchscript_file_pushed_as_onnx_is_refused(app_client) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ApiError) as caught:
        _as(app_client, 3).push_model(support.Tagged.torchscript(7.0), "wrong-format", "onnx", private=False)
    assert caught.value.status == 422


def test_models_that_load_are_accepted_in_both_formats(app_client) -> None:  # type: ignore[no-untyped-def]
    owner = _as(app_client, 3)
    for data, fmt in ((support.Tagged.torchscript(5.0), "torchscript"), (support.Tagged.onnx(5.0), "onnx")):
        row = owner.push_model(data, f"good-{fmt}", fmt, private=False)
        assert row["format"] == fmt and _stored(app_client, data)


def _inputs(client: BackendClient, *arrays: np.ndarray) -> list[str]:
    return [client.upload_input(encode_output(a)) for a in arrays]


def test_dry_run_passes_inputs_the_model_takes_and_reports_the_output(app_client) -> None:  # type: ignore[no-untyped-def]
    renter = _as(app_client, 3)
    model = renter.push_model(support.Tagged.torchscript(9.0), "dry", "torchscript", private=True)["content_hash"]
    items = _inputs(renter, *(np.full(8, i, np.float32) for i in range(3)))
    verdict = renter.check_model(model, items)
    assert verdict["ok"] is True and verdict["stage"] == "ok", verdict
    assert verdict["output_shape"] == [8] and verdict["output_dtype"] == "float32" and verdict["items"] == 3


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_dry_run_refuses_inputs_of_the_wrong_shape(app_client, fmt) -> None:  # type: ignore[no-untyped-def]
    renter = _as(app_client, 3)
    if fmt == "torchscript":  # a Linear(8, 4): items of 5 values cannot go through it
        import io

        import torch

        from tests.tiny_models import Tiny

        buffer = io.BytesIO()
        torch.jit.save(torch.jit.script(Tiny()), buffer)
        data = buffer.getvalue()
    else:  # the exported graph declares float32 [batch, 8]
        data = support.Tagged.onnx(11.0)
    model = renter.push_model(data, "shape", fmt, private=True)["content_hash"]
    items = _inputs(renter, np.zeros(5, np.float32))
    verdict = renter.check_model(model, items)
    assert verdict["ok"] is False and verdict["stage"] == "run" and verdict["error"], verdict


def test_dry_run_refuses_junk_inputs(app_client) -> None:  # type: ignore[no-untyped-def]
    renter = _as(app_client, 3)
    model = renter.push_model(support.Tagged.torchscript(12.0), "junk-in", "torchscript", private=True)["content_hash"]
    junk = renter.upload_input(b"a text file is not an encoded array")
    verdict = renter.check_model(model, [junk])
    assert verdict["ok"] is False and verdict["stage"] == "input", verdict
    assert verdict["error"] == "input item 0 is not an encoded array: input has no header line", verdict


def test_dry_run_of_an_unknown_or_someone_elses_model_or_input_is_404(app_client) -> None:  # type: ignore[no-untyped-def]
    renter, stranger = _as(app_client, 3), _as(app_client, 4)
    model = renter.push_model(support.Tagged.torchscript(13.0), "mine", "torchscript", private=True)["content_hash"]
    item = _inputs(renter, np.zeros(8, np.float32))
    with pytest.raises(ApiError) as caught:
        renter.check_model("0x" + "ab" * 32, item)
    assert caught.value.status == 404 and "model" in caught.value.detail
    with pytest.raises(ApiError) as caught:
        stranger.check_model(model, item)  # a private model of someone else does not exist for you
    assert caught.value.status == 404
    theirs = _inputs(stranger, np.full(8, 4242.0, np.float32))
    with pytest.raises(ApiError) as caught:
        renter.check_model(model, theirs)  # nor does reading someone else's inputs through a model
    assert caught.value.status == 403
    response = app_client.post(f"/models/{model}/check", json={"inputs": item})
    assert response.status_code == 401


def test_two_renters_with_identical_inputs_each_dry_run_their_own(app_client) -> None:  # type: ignore[no-untyped-def]
    """Content addressing makes identical bytes one blob: the second renter to upload them holds
    them as much as the first (it proved it by uploading), and a third, who did not, does not."""
    first, second, stranger = _as(app_client, 3), _as(app_client, 4), _as(app_client, 5)
    model = first.push_model(support.Tagged.torchscript(14.0), "shared", "torchscript", private=False)["content_hash"]
    same = np.full(8, 7.0, np.float32)
    assert _inputs(first, same) == _inputs(second, same)
    assert second.check_model(model, _inputs(second, same))["ok"] is True
    with pytest.raises(ApiError) as caught:
        stranger.check_model(model, _inputs(first, same))  # the hash alone gives no access
    assert caught.value.status == 403


def test_a_model_that_hangs_or_hogs_memory_is_stopped_at_the_checker_limits(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The loader runs untrusted files: a model that loops or allocates without end is killed
    at the checker's limits and the backend gets a verdict, not a hang."""
    import torch

    from tests.tiny_models import Hangs, Hogs

    checker = ModelChecker(CheckLimits(memory_bytes=3 << 30, timeout_s=60.0, max_concurrent=1))
    tight = ModelChecker(CheckLimits(memory_bytes=3 << 30, timeout_s=25.0, max_concurrent=1))
    item = tmp_path / "item"
    item.write_bytes(encode_output(np.zeros(8, np.float32)))
    for module, words in ((Hangs(), "budget"), (Hogs(), "")):
        path = tmp_path / f"{type(module).__name__}.pt"
        torch.jit.save(torch.jit.script(module), str(path))
        assert checker.check(path, "torchscript").ok  # it loads...
        verdict = tight.check(path, "torchscript", [item])  # ...but cannot run
        assert not verdict.ok and verdict.stage in ("limits", "run") and words in verdict.error, verdict
