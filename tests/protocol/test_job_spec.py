"""Job specs and output encodings: canonical, validated, hashed the same by every party."""

import json

import numpy as np
import pytest

from protocol.jobs import JobSpec, JobSpecError, decode_output, encode_output, output_digest, within_tolerance
from protocol.merkle import keccak256

H = "0x" + "ab" * 32


def spec(**kw):
    base = dict(model=H, model_format="torchscript", inputs=(H, "0x" + "cd" * 32), batch_size=8,
                tolerance_ppm=1000, deadline=1_900_000_000, price_wei=10**17,
                provider="0x" + "11" * 20)
    base.update(kw)
    return JobSpec(**base)


def test_canonical_round_trip_and_hash():
    s = spec()
    assert JobSpec.parse(s.canonical()) == s
    assert s.spec_hash == keccak256(s.canonical())
    # Key order and spacing of the input do not change the hash.
    doc = json.loads(s.canonical())
    shuffled = json.dumps(dict(reversed(list(doc.items()))), indent=2)
    assert JobSpec.parse(shuffled).spec_hash == s.spec_hash


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("model"), "model: missing"),
    (lambda d: d.update(model="0x12"), "model: expected 0x"),
    (lambda d: d.update(modelFormat="pickle"), "modelFormat"),
    (lambda d: d.update(inputs=[]), "inputs: 0 items"),
    (lambda d: d.update(batchSize=0), "batchSize"),
    (lambda d: d.update(batchSize=True), "batchSize: expected int"),
    (lambda d: d.update(priceWei="-5"), "priceWei"),
    (lambda d: d.update(priceWei=5), "priceWei: expected str"),
    (lambda d: d.update(provider="0xnope"), "provider"),
    (lambda d: d.update(version=2), "version"),
    (lambda d: d.update(extra=1), "unknown field"),
])
def test_malformed_specs_are_refused_with_the_field_named(mutate, message):
    doc = json.loads(spec().canonical())
    mutate(doc)
    with pytest.raises(JobSpecError, match=message):
        JobSpec.parse(json.dumps(doc))


def test_oversized_and_non_json_specs_are_refused():
    with pytest.raises(JobSpecError, match="limit"):
        JobSpec.parse(b"{" + b" " * 70_000 + b"}")
    with pytest.raises(JobSpecError, match="not JSON"):
        JobSpec.parse(b"\xff\xfe")
    with pytest.raises(JobSpecError, match="object"):
        JobSpec.parse(b"[1, 2]")


def test_output_encoding_round_trips_and_digests_bytes_exactly():
    out = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    encoded = encode_output(out)
    assert np.array_equal(decode_output(encoded), out)
    assert output_digest(encoded) == keccak256(encoded)
    assert output_digest(encode_output(out + np.float32(1e-7))) != output_digest(encoded)


def test_malformed_outputs_are_refused():
    good = encode_output(np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(JobSpecError, match="no header"):
        decode_output(b"abc")
    with pytest.raises(JobSpecError, match="need"):
        decode_output(good[:-1])
    with pytest.raises(JobSpecError, match="first line is not a JSON header naming dtype and shape"):
        decode_output(b'{"dtype": "object"}\n')
    with pytest.raises(JobSpecError):
        encode_output(np.array(["x"], dtype=object))


def test_tolerance_is_relative_with_an_absolute_floor():
    want = np.array([1000.0, 0.001], dtype=np.float32)
    assert within_tolerance(want * (1 + 5e-4), want, 1000)
    assert not within_tolerance(want * (1 + 5e-3), want, 1000)
    assert within_tolerance(want, want, 0)
    assert not within_tolerance(want + 1e-3, want, 0)
    assert not within_tolerance(want[:1], want, 1000)
