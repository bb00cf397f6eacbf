"""GPU classes for Proof of GPU: what each class can reach, and what a round proves.

The verifier, never the prover, picks n from the claimed class (`n_for`) and measures the rate
r = 2 n^3 / (seed-to-root time) of every claimed GPU of a round; it then probes every device's
residency fill at once (protocol/pog/residency.py). `identify` answers (docs/PROTOCOL.md, "PoG
class identification"):

1. Is r consistent with the claim? Above the class's *exact ceiling* (no device of the class
   is faster, whatever it computes in) the claim is false and the round fails (`ClassRejected`).
   Below `HONEST_FLOOR` of the class's peak in the round's dtype the work still counts (it was
   checked exactly) but the class is not shown: the verdict is "unidentified", never a failure,
   since a correct round that is merely slow (a slow commitment path, a throttled device, one
   device doing two claimed devices' work) costs nobody anything, and an honest device must
   never fail for being slower end to end than its datasheet.
2. How many devices does the round prove? Memory counts them, not time: the devices whose fills
   answered the concurrent probe in time (`resident`), since a device holds one fill of its
   class and a fill cannot be regenerated within the deadline. A round of one device needs no
   probe. The class is named only for a round whose total rate G r is beyond the fastest CPU
   server (`CPU_EXACT_CEILING`): below it a server with enough RAM could have done it all.
   Otherwise the work still counts (it was checked exactly) but the verdict is "unidentified".

Why an exact ceiling and not the dtype's peak: PoG entries are 4-bit integers in [-8, 8) and C
is exact in int32, so a prover may multiply in any arithmetic that holds them (int4, int8, fp16,
bf16, fp32, AMX, VNNI). The round's dtype only sizes n and sets the honest floor; it cannot bind
what the prover uses. A class's ceiling is therefore its fastest exact dense path: int8 tensor
cores on Hopper (no int4 there), int4 tensor cores on Turing, Ampere and Ada. Peaks are the
vendors' dense (no sparsity) figures; fp16/bf16 are tensor-core rates with fp32 accumulation,
which PoG needs for exactness (GeForce cards run those at half their fp16-accumulate rate).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from protocol.errors import ClassRejected, InvalidParameter
from protocol.pog.workload import MAX_N, MIN_N

# int8: A and Bt as int8, C as int32 (torch._int_mm); the others: A and Bt in the dtype, C fp32.
DTYPES = ("int8", "fp16", "bf16", "fp32")
GIB = 1 << 30
# A, Bt (1 byte each in int8, 2 in fp16/bf16, 4 in fp32) and C (4 bytes) resident on the device.
BYTES_PER_ENTRY = {"int8": 6, "fp16": 8, "bf16": 8, "fp32": 12}
# The honest floor: the lowest matmul rate, as a share of the class's peak in the round's dtype,
# at which a round names the class. Below it the round passes unidentified (never fails). It must
# lie above half of what a device of the class reaches (one device doing two claimed devices'
# work shows half its rate per claim) and below what an honest device shows end to end.
# Measured on an H200 (docs/BENCHMARKS.md, 2026-12-04): torch's int8 multiply alone reaches 0.49
# of the int8 datasheet, so 0.30 sits above the time-sharer's 0.245 and leaves the commitment
# 1.6x of the multiply's time; the eager torch keccak took about 50x, so rounds hashed that way
# pass unidentified until a dedicated GPU keccak kernel is measured.
HONEST_FLOOR = 0.30

# What the fastest CPU boxes reach per arithmetic, dense peak in TFLOPS/TOPS, two sockets:
# - int8: Intel Xeon 6980P (Granite Rapids, 128 cores), AMX: 2048 int8 ops per cycle per core
#   at 2.0 GHz all-core: 128 * 2048 * 2.0e9 = 524.3 TOPS a socket, 1048.6 for two.
# - bf16/fp16: the same AMX tiles at 1024 flops per cycle per core: 524.3 for two sockets
#   (AMX-FP16 is Granite Rapids'; Sapphire Rapids has bf16 only).
# - fp32: AMD EPYC 9965 (Zen 5, 192 cores), two 512-bit FMA pipes = 64 flops per cycle per core
#   at 3.0 GHz: 36.9 a socket, 73.7 for two (no AMX fp32 on either vendor's parts).
# A CPU prover uses whichever is fastest, so `CPU_EXACT_CEILING` (the maximum) is what a GPU
# class must beat: the round's dtype cannot force a CPU into fp32. For scale, this project's
# 2-core AMD EPYC slice (AVX-512 BF16/VNNI, no AMX) measured 0.09-0.27 TFLOPS fp32, 0.06-0.15
# bf16 and 0.09 TOPS int8 (tests/verifier/test_pog_checker.py checks it stays below).
# Not covered: 4- and 8-socket servers (Sapphire Rapids 8490H x8 peaks near 1.9 POPS int8);
# such a machine costs more than the GPUs it could pose as and is left out, as stated in
# docs/PROTOCOL.md.
CPU_CEILING_TOPS = {"int8": 1048.6, "fp16": 524.3, "bf16": 524.3, "fp32": 73.7}
CPU_EXACT_CEILING = max(CPU_CEILING_TOPS.values())


@dataclass(frozen=True)
class GpuProfile:
    """One class. `band(dtype)` holds the rates consistent with it; `ceiling` bounds any device
    of it in any exact arithmetic (int4/int8 tensor peaks included)."""

    name: str
    pattern: str
    fp16_tflops: float
    bf16_tflops: float
    fp32_tflops: float
    memory_gib: float  # nominal (physical) memory: all an attacker's device can hold
    int8_tops: float = 0.0
    int4_tops: float = 0.0  # 0: no int4 tensor cores (Hopper)
    tolerance: float = 0.10  # boost clocks above the datasheet
    min_efficiency: float = HONEST_FLOOR
    is_cpu: bool = False
    # NVIDIA's confidential computing signs an attestation report bound to a nonce (the round's
    # seed) on this class: a verified report shows the device where timing cannot (one GPU below
    # a CPU server's ceiling), verifier/pog_checker.py.
    attestable: bool = False
    # What the driver lets a process allocate (torch's total_memory, ECC on where the class has
    # it): the residency fill is sized from it (protocol/pog/residency.py).
    usable_gib: float = 0.0

    def peak(self, dtype: str) -> float:
        if dtype not in DTYPES:
            raise InvalidParameter("dtype", dtype, f"must be one of {DTYPES}")
        return float(getattr(self, f"{dtype}_tops" if dtype == "int8" else f"{dtype}_tflops"))

    @property
    def ceiling(self) -> float:
        """The highest rate any device of this class reaches on the PoG workload."""
        fastest = max(self.fp16_tflops, self.bf16_tflops, self.fp32_tflops, self.int8_tops,
                      self.int4_tops)
        return fastest * (1.0 + self.tolerance)

    def band(self, dtype: str) -> tuple[float, float]:
        """The measured rates consistent with this class in a round of `dtype`."""
        return self.peak(dtype) * self.min_efficiency, self.ceiling

    def matches(self, name: str) -> bool:
        return re.search(self.pattern, name, re.IGNORECASE) is not None


# Order matters for name matching: the first pattern that matches a device name wins.
PROFILES: tuple[GpuProfile, ...] = (
    GpuProfile("H100 SXM", r"H100.*(SXM|HBM3)", 989.4, 989.4, 66.9, 80, 1978.9, usable_gib=79.1,
               attestable=True),
    GpuProfile("H100 PCIe", r"H100", 756.0, 756.0, 51.2, 80, 1513.0, usable_gib=79.1, attestable=True),
    GpuProfile("H200", r"H200", 989.4, 989.4, 66.9, 141, 1978.9, usable_gib=139.0, attestable=True),
    GpuProfile("A100 80GB", r"A100.*80\s*GB", 312.0, 312.0, 19.5, 80, 624.0, 1248.0,
               usable_gib=79.1),
    GpuProfile("A100 40GB", r"A100", 312.0, 312.0, 19.5, 40, 624.0, 1248.0, usable_gib=39.4),
    GpuProfile("L40S", r"L40S", 362.1, 362.1, 91.6, 48, 733.0, 1466.0, usable_gib=44.3),
    GpuProfile("RTX 4090", r"RTX\s*4090", 165.2, 165.2, 82.6, 24, 660.6, 1321.2, usable_gib=23.5),
    GpuProfile("RTX 3090", r"RTX\s*3090", 71.0, 71.0, 35.6, 24, 284.0, 568.0, usable_gib=23.5),
    GpuProfile("A10", r"\bA10(?![0-9])", 125.0, 125.0, 31.2, 24, 250.0, 500.0, usable_gib=22.0),
    # Turing has no bf16 tensor cores: torch emulates it far below the fp16 rate.
    GpuProfile("T4", r"\bT4\b", 65.0, 8.1, 8.1, 16, 130.0, 260.0, usable_gib=14.6),
    # A CPU is its own class: any honest rate up to the fastest servers' ceiling, small n.
    GpuProfile("CPU", r"^cpu", CPU_CEILING_TOPS["fp16"], CPU_CEILING_TOPS["bf16"],
               CPU_CEILING_TOPS["fp32"], 0.25, CPU_CEILING_TOPS["int8"], tolerance=0.0,
               min_efficiency=0.0, is_cpu=True, usable_gib=0.25),
)


@dataclass(frozen=True)
class Identification:
    """What a round of `gpu_count` claimed GPUs shows about one of them.

    `profile` is the class the rate is consistent with; `gpu_class` is its name only when the
    round also proves the devices (`reason` says why not otherwise). `proven_devices` is how
    many devices of the class the round proves: those whose fills answered in time, none when a
    CPU server could have delivered the round's total rate.
    """

    profile: GpuProfile
    identified: bool
    proven_devices: int
    reason: str | None = None

    @property
    def gpu_class(self) -> str | None:
        return self.profile.name if self.identified else None


def lookup(name: str) -> GpuProfile | None:
    """The class a device name (NVML or torch spelling) claims, or None if unknown."""
    for profile in PROFILES:
        if profile.matches(name):
            return profile
    return None


def _counted(gpu_count: int, resident: int | None) -> int:
    """Devices memory counts: those whose fills answered in time; a round without a residency
    probe counts one device at most (time alone cannot tell one device from several)."""
    return min(gpu_count, 1) if resident is None else resident


def proven_devices(profile: GpuProfile, measured_tflops: float, gpu_count: int,
                   resident: int | None = None) -> int:
    """How many devices of `profile` a round proves: the resident ones, or none when the
    round's total G * r is within the fastest CPU server's reach (a server with the RAM for
    the fills could have done the whole round)."""
    if profile.is_cpu:
        return gpu_count
    if gpu_count * measured_tflops <= CPU_EXACT_CEILING:
        return 0
    return _counted(gpu_count, resident)


def identify(name: str, measured_tflops: float, dtype: str, gpu_count: int = 1,
             resident: int | None = None) -> Identification:
    """The class a measurement is consistent with and whether the round proves it, or
    `ClassRejected`.

    `resident` is the number of claimed devices whose residency fills answered the concurrent
    probe in time (None: no probe was run). A known name must fit its own class's band. An
    unknown name gets the weakest class whose band holds the measurement, so nobody is
    credited above what was measured.
    """
    if not math.isfinite(measured_tflops) or measured_tflops < 0:
        raise ClassRejected(name, measured_tflops, dtype, "not a valid measurement")
    if not isinstance(gpu_count, int) or isinstance(gpu_count, bool) or gpu_count < 1:
        raise InvalidParameter("gpu_count", gpu_count, "must be a positive integer")
    if resident is not None and (not isinstance(resident, int) or isinstance(resident, bool)
                                 or not 0 <= resident <= gpu_count):
        raise InvalidParameter("resident", resident, f"must be an integer in [0, {gpu_count}]")
    claimed = lookup(name)
    if claimed is not None:
        low, high = claimed.band(dtype)
        if measured_tflops > high:
            raise ClassRejected(
                name, measured_tflops, dtype,
                f"faster than any {claimed.name} ({high:.3f} TFLOPS in its fastest exact arithmetic)",
            )
        if measured_tflops < low:
            return Identification(claimed, False, 0, (
                f"{measured_tflops:.1f} TFLOPS is below {claimed.name}'s honest floor "
                f"({HONEST_FLOOR:.2f} x its {dtype} peak = {low:.1f}): the work checks out, the class is not shown"))
        profile = claimed
    else:
        fits = [p for p in PROFILES if p.band(dtype)[0] <= measured_tflops <= p.band(dtype)[1]]
        if not fits:
            raise ClassRejected(name, measured_tflops, dtype, "no class within tolerance")
        profile = min(fits, key=lambda p: p.ceiling)
    return _proves(profile, measured_tflops, gpu_count, resident)


def _proves(profile: GpuProfile, measured: float, gpu_count: int,
            resident: int | None) -> Identification:
    if profile.is_cpu:  # nobody gains by posing as a CPU; count as many as claimed
        return Identification(profile, True, gpu_count)
    devices = proven_devices(profile, measured, gpu_count, resident)
    if devices >= gpu_count:
        return Identification(profile, True, gpu_count)
    total = gpu_count * measured
    if total <= CPU_EXACT_CEILING:
        return Identification(profile, False, 0, (
            f"{total:.1f} TFLOPS in all is within a CPU server's reach "
            f"({CPU_EXACT_CEILING:.1f}, AMX int8)"))
    if resident is None:
        return Identification(profile, False, devices, (
            f"{gpu_count} devices claimed without a residency probe: time alone proves one"))
    return Identification(profile, False, devices, (
        f"{devices} of {gpu_count} residency fills answered the probe in time"))


def identifiable_floor(profile: GpuProfile, gpu_count: int = 1) -> float:
    """The rate per GPU above which a round of `gpu_count` resident GPUs of `profile` names the
    class: their total is beyond the fastest CPU server (the band's floor applies as well)."""
    if profile.is_cpu:
        return 0.0
    return CPU_EXACT_CEILING / gpu_count


def n_for(profile: GpuProfile, dtype: str = "int8", memory_share: float = 0.25) -> int:
    """The n a verifier assigns so that A, Bt and C fill `memory_share` of the class's memory.

    Memory does not bind the prover (A and Bt regenerate from the seed block by block, so C
    can be computed in about 1 GiB at any n); n is as large as memory allows because the
    commitment's O(n^2) overhead shrinks against the O(n^3) multiply as n grows."""
    if not 0 < memory_share <= 0.9:
        raise InvalidParameter("memory_share", memory_share, "must be in (0, 0.9]")
    profile.peak(dtype)
    n = math.isqrt(int(profile.memory_gib * GIB * memory_share) // BYTES_PER_ENTRY[dtype])
    return max(MIN_N, min(MAX_N, n // 64 * 64))
