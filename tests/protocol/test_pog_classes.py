"""Class identification: what a round proves (protocol/pog/profiles.py).

A rate is consistent with a class when it lies in the class's band; the round names the class
for its G claimed devices only when all G residency fills answered the concurrent probe (memory
counts devices, time cannot) and the round's total is beyond a CPU server. These are the rule's
bounds checked over every class, dtype and GPU count; tests/verifier/test_pog_checker.py and
tests/verifier/test_pog_residency_round.py play the attacks through real rounds.
"""

import pytest

from protocol.errors import ClassRejected, InvalidParameter
from protocol.pog.profiles import (
    CPU_CEILING_TOPS,
    CPU_EXACT_CEILING,
    DTYPES,
    HONEST_FLOOR,
    PROFILES,
    identifiable_floor,
    identify,
    lookup,
    proven_devices,
)

GPUS = [p for p in PROFILES if not p.is_cpu]
H100 = "NVIDIA H100 80GB HBM3"


def name_of(profile):
    return "NVIDIA H100 80GB HBM3" if profile.name == "H100 SXM" else f"NVIDIA {profile.name}"


def rates_in_band(profile, dtype, steps=200):
    low, high = profile.band(dtype)
    return [low + (high - low) * i / steps for i in range(steps + 1)]


def test_cpu_ceiling_is_the_documented_server_arithmetic():
    # two sockets of 128 AMX cores at 2.0 GHz: 2048 int8 ops, 1024 bf16/fp16 flops a cycle
    assert CPU_CEILING_TOPS["int8"] == pytest.approx(2 * 128 * 2048 * 2.0e9 / 1e12, rel=1e-4)
    assert CPU_CEILING_TOPS["bf16"] == pytest.approx(2 * 128 * 1024 * 2.0e9 / 1e12, rel=1e-4)
    # two sockets of 192 Zen 5 cores, 64 fp32 flops a cycle at 3.0 GHz
    assert CPU_CEILING_TOPS["fp32"] == pytest.approx(2 * 192 * 64 * 3.0e9 / 1e12, rel=1e-3)
    assert CPU_EXACT_CEILING == CPU_CEILING_TOPS["int8"]


@pytest.mark.parametrize("profile", GPUS, ids=lambda p: p.name)
def test_one_device_doing_two_claimed_gpus_work_is_never_identified(profile):
    # The fastest device of the class, in its fastest exact arithmetic, doing the matrices of
    # G+1 claimed GPUs on G devices: each claimed GPU is credited at most G/(G+1) of the ceiling.
    for dtype in DTYPES:
        for devices in range(1, 8):
            claimed = devices + 1
            rate = profile.ceiling * devices / claimed
            try:
                found = identify(name_of(profile), rate, dtype, claimed)
            except ClassRejected:
                continue  # slower than the class's floor in this dtype: fails outright
            assert not found.identified, (profile.name, dtype, devices)
            assert found.gpu_class is None and found.proven_devices <= devices


@pytest.mark.parametrize("profile", GPUS, ids=lambda p: p.name)
def test_a_cpu_server_is_never_identified_as_a_gpu_class(profile):
    for dtype in DTYPES:
        for gpu_count in (1, 2, 3, 4, 8):
            for rate in rates_in_band(profile, dtype):
                if gpu_count * rate > CPU_EXACT_CEILING:
                    continue  # more than any CPU box delivers in all
                found = identify(name_of(profile), rate, dtype, gpu_count)
                assert found.gpu_class is None, (profile.name, dtype, gpu_count, rate)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cpu_at_its_ceiling_in_every_dtype_is_not_a_t4(dtype):
    for arithmetic, rate in CPU_CEILING_TOPS.items():
        for fraction in (0.01, 0.1, 0.5, 1.0):
            try:
                found = identify("Tesla T4", rate * fraction, dtype)
            except ClassRejected:
                continue
            assert found.gpu_class != "T4", (arithmetic, fraction)


def test_weak_classes_are_never_identifiable_against_a_cpu_server():
    # No T4, A10 or RTX 3090 box of up to 3 GPUs on the int8 path torch offers out-computes a
    # two-socket AMX server, which could hold their fills in RAM: such boxes pass "unidentified".
    for name in ("Tesla T4", "NVIDIA A10", "NVIDIA GeForce RTX 3090"):
        profile = lookup(name)
        for gpu_count in (1, 2, 3):
            assert identifiable_floor(profile, gpu_count) > profile.int8_tops * 1.1, name


def test_one_h100_is_named_above_a_cpu_server_without_a_probe():
    peak = lookup(H100).int8_tops
    found = identify(H100, 0.7 * peak, "int8")  # 1385 TOPS: beyond any two-socket CPU server
    assert found.gpu_class == "H100 SXM" and found.proven_devices == 1
    found = identify(H100, 0.5 * peak, "int8")  # 989 TOPS: a server at its AMX peak could
    assert found.gpu_class is None and "CPU server" in found.reason


def test_devices_are_counted_by_their_resident_fills_not_by_speed():
    # Before: two H100s needed 81% of the int8 peak each and eight more than the peak, so an
    # 8-GPU server was never named. Now any rate in the band counts, and memory counts devices.
    peak = lookup(H100).int8_tops
    for gpu_count in (2, 4, 8):
        found = identify(H100, 0.35 * peak, "int8", gpu_count, resident=gpu_count)
        assert found.gpu_class == "H100 SXM" and found.proven_devices == gpu_count
    found = identify(H100, 0.9 * peak, "int8", 2, resident=1)
    assert not found.identified and found.proven_devices == 1
    assert found.reason == "1 of 2 residency fills answered the probe in time"
    # Without a probe, time alone proves one device, however fast each claimed GPU looks.
    found = identify(H100, peak, "int8", 2)
    assert not found.identified and found.proven_devices == 1
    assert "without a residency probe" in found.reason


def test_a_rate_below_the_honest_floor_passes_unidentified_and_the_floor_is_one_constant():
    for profile in GPUS:
        for dtype in DTYPES:
            assert profile.band(dtype)[0] == pytest.approx(HONEST_FLOOR * profile.peak(dtype))
    found = identify(H100, 0.99 * HONEST_FLOOR * lookup(H100).int8_tops, "int8", 2, resident=2)
    assert not found.identified and found.proven_devices == 0 and "honest floor" in found.reason


def test_an_honest_h200_hashing_slowly_is_never_failed():
    # Measured on an H200 (docs/BENCHMARKS.md, 2026-12-04): torch's int8 multiply reaches 969
    # TOPS, and with the eager torch keccak a round at n = 65536 spends about 27 s hashing, about
    # 20 TOPS end to end. Before: ClassRejected, a failed round for correct work.
    h200 = "NVIDIA H200"
    seconds = 0.58 + 27.0
    rate = 2 * 65536**3 / seconds / 1e12
    found = identify(h200, rate, "int8")
    assert not found.identified and "honest floor" in found.reason
    # the time-sharer (one device, two claims) shows half of 969 per claim: below the floor too
    assert not identify(h200, 969 / 2, "int8", 2, resident=2).identified


def test_h100_in_fp16_is_consistent_but_not_identified():
    found = identify(H100, 0.8 * 989.4, "fp16")
    assert found.profile.name == "H100 SXM" and found.gpu_class is None
    assert "CPU server" in found.reason


@pytest.mark.parametrize("profile", GPUS, ids=lambda p: p.name)
def test_identifiable_floor_is_the_boundary(profile):
    for gpu_count in (1, 2, 3, 8):
        floor = identifiable_floor(profile, gpu_count)
        for rate, expected in ((floor * 1.001, True), (floor, False)):
            low, high = profile.band("int8")
            if not low <= rate <= high:
                continue
            found = identify(name_of(profile), rate, "int8", gpu_count, resident=gpu_count)
            assert found.identified is expected, (profile.name, gpu_count, rate)


def test_proven_devices_are_the_resident_ones_beyond_a_cpu_server():
    h100 = lookup(H100)
    assert proven_devices(h100, 1000.0, 4, resident=4) == 4
    assert proven_devices(h100, 1000.0, 4, resident=3) == 3
    assert proven_devices(h100, 1000.0, 4) == 1
    assert proven_devices(h100, CPU_EXACT_CEILING, 1, resident=1) == 0
    assert proven_devices(h100, 0.0, 3, resident=3) == 0


def test_the_cpu_class_names_itself_at_any_honest_rate():
    for dtype in DTYPES:
        for rate in (0.0, 0.09, 50.0, CPU_EXACT_CEILING):
            found = identify("cpu x86_64", rate, dtype, 2)
            assert found.gpu_class == "CPU" and found.proven_devices == 2
    with pytest.raises(ClassRejected):
        identify("cpu x86_64", CPU_EXACT_CEILING * 1.01, "fp32")


def test_bad_gpu_count_or_resident_count_is_refused():
    with pytest.raises(InvalidParameter):
        identify(H100, 1000.0, "int8", 0)
    for resident in (-1, 3, True, 1.0):
        with pytest.raises(InvalidParameter, match="resident"):
            identify(H100, 1000.0, "int8", 2, resident=resident)
