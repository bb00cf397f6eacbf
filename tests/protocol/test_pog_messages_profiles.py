"""Wire messages (strict, size-limited JSON) and GPU classes (identify, n_for)."""

import json

import pytest
from eth_utils import keccak

from protocol.errors import ClassRejected
from protocol.merkle import MAX_PROOF_DEPTH
from protocol.pog.messages import (
    ChunkAnswer,
    GpuAnswers,
    GpuCommitment,
    MalformedMessage,
    MessageTooLarge,
    RoundAnswers,
    RoundCommitment,
    decode_answers,
    decode_commitment,
    encode_answers,
    encode_commitment,
    max_answers_bytes,
)
from protocol.pog.profiles import BYTES_PER_ENTRY, GIB, PROFILES, identify, lookup, n_for

SEED = keccak(b"seed")


def answers_message(k=32, siblings=12):
    answer = ChunkAnswer(5, bytes(range(256)), tuple(keccak(bytes([i])) for i in range(siblings)))
    return RoundAnswers(SEED, (GpuAnswers(0, (answer,) * k),))


def test_answers_round_trip_through_json():
    message = answers_message()
    assert decode_answers(encode_answers(message), 1, 32) == message


def test_commitment_round_trip_and_n_checked():
    message = RoundCommitment(SEED, (GpuCommitment(0, keccak(b"u"), 128, keccak(b"r")),))
    assert decode_commitment(encode_commitment(message), 1) == message
    bad = json.loads(encode_commitment(message))
    bad["gpus"][0]["n"] = 100
    with pytest.raises(MalformedMessage):
        decode_commitment(json.dumps(bad).encode(), 1)


def test_oversized_answers_are_refused_before_parsing():
    limit = max_answers_bytes(1, 32)
    assert len(encode_answers(answers_message(siblings=MAX_PROOF_DEPTH))) <= limit
    with pytest.raises(MessageTooLarge):
        decode_answers(b"[" * (limit + 1), 1, 32)  # would be a RecursionError if parsed
    with pytest.raises(MessageTooLarge):
        # 16 answers too many outweigh the room kept for a device identity and its evidence
        decode_answers(encode_answers(answers_message(k=48, siblings=MAX_PROOF_DEPTH)), 1, 32)


@pytest.mark.parametrize("mutate", [
    lambda m: m["gpus"][0]["answers"][0].update(index=True),
    lambda m: m["gpus"][0]["answers"][0].update(index=-1),
    lambda m: m["gpus"][0]["answers"][0].update(data="0x" + "zz" * 256),
    lambda m: m["gpus"][0]["answers"][0].update(data="0x" + "00" * 255),
    lambda m: m["gpus"][0]["answers"][0]["siblings"].extend(["0x" + "00" * 32] * 30),
    lambda m: m["gpus"][0]["answers"][0]["siblings"].append("0x00"),
    lambda m: m.update(round_seed=12),
    lambda m: m.pop("gpus"),
])
def test_malformed_answers_are_refused(mutate):
    message = json.loads(encode_answers(answers_message(k=2, siblings=3)))
    mutate(message)
    with pytest.raises(MalformedMessage):
        decode_answers(json.dumps(message).encode(), 1, 32)


def test_non_json_constants_are_refused():
    with pytest.raises(MalformedMessage):
        decode_answers(b'{"round_seed": NaN, "gpus": []}', 1, 32)


def test_every_profile_names_itself():
    for profile in PROFILES:
        name = "cpu x86" if profile.name == "CPU" else f"NVIDIA {profile.name}"
        if profile.name == "H100 SXM":
            name = "NVIDIA H100 80GB HBM3"
        assert lookup(name) is profile, profile.name


def test_identify_accepts_within_band_and_rejects_outside():
    h100 = lookup("NVIDIA H100 80GB HBM3")
    assert identify("NVIDIA H100 80GB HBM3", 700.0, "fp16").profile is h100
    assert identify("NVIDIA H100 80GB HBM3", 1400.0, "int8").gpu_class == "H100 SXM"
    posing = identify("NVIDIA H100 80GB HBM3", 150.0, "fp16")  # an RTX 4090's rate posing as H100
    assert posing.gpu_class is None and "honest floor" in posing.reason
    with pytest.raises(ClassRejected):
        identify("NVIDIA H100 80GB HBM3", 2500.0, "int8")  # faster than any H100 in any arithmetic
    with pytest.raises(ClassRejected):
        identify("NVIDIA H100 80GB HBM3", float("nan"), "fp16")


def test_unknown_name_gets_the_weakest_class_that_fits():
    assert identify("Mystery GPU", 150.0, "fp16").profile.name == "T4"
    assert identify("Mystery GPU", 1400.0, "int8").gpu_class == "RTX 4090"
    assert identify("Mystery GPU", 0.05, "fp32").gpu_class == "CPU"
    with pytest.raises(ClassRejected):
        identify("Mystery GPU", 5000.0, "fp16")


def test_n_for_fills_the_share_of_memory_and_is_valid():
    for profile in PROFILES:
        for dtype in ("int8", "fp16", "fp32"):
            n = n_for(profile, dtype, 0.25)
            assert n % 64 == 0 and 64 <= n <= 65536
            used = n * n * BYTES_PER_ENTRY[dtype]
            assert used <= 0.25 * profile.memory_gib * GIB
            if n < 65536:
                assert (n + 64) ** 2 * BYTES_PER_ENTRY[dtype] > 0.25 * profile.memory_gib * GIB
    assert n_for(lookup("NVIDIA H200"), "fp16", 0.5) == 65536

