"""Device identity and attestation evidence in the PoG answers message: versioned, strictly
parsed, bounded by NVML's own buffer sizes, optional for provers that have none (a CPU)."""

import json

import pytest
from eth_utils import keccak

from protocol.merkle import MAX_PROOF_DEPTH
from protocol.pog.identity import (
    MAX_CERT_CHAIN_BYTES,
    MAX_REPORT_BYTES,
    AttestationEvidence,
    DeviceIdentity,
)
from protocol.pog.messages import (
    ChunkAnswer,
    GpuAnswers,
    MalformedMessage,
    RoundAnswers,
    decode_answers,
    encode_answers,
    max_answers_bytes,
)

SEED = keccak(b"seed")
H200 = DeviceIdentity("NVIDIA H200", "GPU-8f6b2a4c-1d2e-4f50-9a6b-7c8d9e0f1a2b", 150_754_820_096,
                      "1654123456789", "550.90.07", "on")
EVIDENCE = AttestationEvidence(b"\x11\xe0" * 10, b"-----BEGIN CERTIFICATE-----\nMIID\n-----END CERTIFICATE-----\n")


def message(identity=H200, evidence=EVIDENCE, k=2, siblings=3):
    answer = ChunkAnswer(5, bytes(range(256)), tuple(keccak(bytes([i])) for i in range(siblings)))
    return RoundAnswers(SEED, (GpuAnswers(0, (answer,) * k, identity, evidence),))


@pytest.mark.parametrize("identity,evidence", [
    (H200, EVIDENCE),
    (DeviceIdentity("NVIDIA GeForce RTX 4090", "GPU-1", 25_757_220_864, None, "550.54.14", "not supported"), None),
    (None, None),  # a CPU, or a prover from before identities: nothing to report
])
def test_identity_and_evidence_round_trip(identity, evidence):
    sent = message(identity, evidence)
    assert decode_answers(encode_answers(sent), 1, 32) == sent


def test_the_largest_identity_and_evidence_fit_the_answers_limit():
    big = DeviceIdentity('"\\' * 48, "G" * 96, 2**64 - 1, "S" * 30, "D" * 80, "devtools")
    evidence = AttestationEvidence(b"\xff" * MAX_REPORT_BYTES, b"\xff" * MAX_CERT_CHAIN_BYTES)
    raw = encode_answers(message(big, evidence, k=32, siblings=MAX_PROOF_DEPTH))
    assert len(raw) <= max_answers_bytes(1, 32)
    assert decode_answers(raw, 1, 32).gpus[0].identity == big


@pytest.mark.parametrize("mutate,reason", [
    (lambda g: g["identity"].update(version=2), "version 2 is not 1"),
    (lambda g: g["identity"].pop("version"), "version None is not 1"),
    (lambda g: g["identity"].update(extra=1), "keys are"),
    (lambda g: g["identity"].pop("serial"), "keys are"),
    (lambda g: g.update(identity="NVIDIA H200"), "identity is not an object"),
    (lambda g: g["identity"].update(name=""), "'name' is not a string of 1 to 96"),
    (lambda g: g["identity"].update(name="H" * 97), "'name' is not a string of 1 to 96"),
    (lambda g: g["identity"].update(name="NVIDIA H200\n"), "'name' is not printable ASCII"),
    (lambda g: g["identity"].update(name="NVIDIA Н200"), "'name' is not printable ASCII"),  # Cyrillic
    (lambda g: g["identity"].update(uuid=7), "'uuid' is not a string"),
    (lambda g: g["identity"].update(serial="S" * 31), "'serial' is not a string of 1 to 30"),
    (lambda g: g["identity"].update(memory_bytes=True), "'memory_bytes' is not a uint64"),
    (lambda g: g["identity"].update(memory_bytes=-1), "'memory_bytes' is not a uint64"),
    (lambda g: g["identity"].update(memory_bytes=2**64), "'memory_bytes' is not a uint64"),
    (lambda g: g["identity"].update(cc_mode="yes"), "'cc_mode' is not one of on, devtools, off, not supported"),
    (lambda g: g["evidence"].update(report="11e0"), "evidence 'report' is not 0x"),
    (lambda g: g["evidence"].update(report="0x"), "evidence 'report' is not 0x"),
    (lambda g: g["evidence"].update(report="0xzz"), "evidence 'report' is not hex"),
    (lambda g: g["evidence"].update(report="0x" + "00" * (MAX_REPORT_BYTES + 1)), "1 to 8192 hex bytes"),
    (lambda g: g["evidence"].update(cert_chain="0x" + "00" * (MAX_CERT_CHAIN_BYTES + 1)), "1 to 5120 hex bytes"),
    (lambda g: g["evidence"].pop("cert_chain"), "evidence keys are"),
])
def test_malformed_identity_or_evidence_is_refused_with_its_reason(mutate, reason):
    raw = json.loads(encode_answers(message()))
    mutate(raw["gpus"][0])
    with pytest.raises(MalformedMessage, match="malformed answers: malformed device identity: ") as err:
        decode_answers(json.dumps(raw).encode(), 1, 32)
    assert reason in str(err.value)
