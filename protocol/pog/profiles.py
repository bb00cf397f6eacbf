"""GPU classes for Proof of GPU: peak dense throughput, memory, and how far a measurement may stray.

The verifier, never the prover, picks n from the claimed class (`n_for`) and compares the
throughput it measured from seed to root with the class's peak (`identify`). Peaks are the
vendors' dense (no sparsity) figures; fp16/bf16 are tensor-core rates with fp32 accumulation,
which PoG needs for exactness (GeForce cards run those at half their fp16-accumulate rate).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from protocol.errors import ClassRejected, InvalidParameter
from protocol.pog.workload import MAX_N, MIN_N

DTYPES = ("fp16", "bf16", "fp32")
GIB = 1 << 30
# A, Bt as fp16/bf16 (2 bytes each) and C as fp32 (4 bytes) stay resident on the device.
BYTES_PER_ENTRY = {"fp16": 8, "bf16": 8, "fp32": 12}


@dataclass(frozen=True)
class GpuProfile:
    """One class. A measurement passes when min_efficiency*peak <= tflops <= (1+tolerance)*peak."""

    name: str
    pattern: str
    fp16_tflops: float
    bf16_tflops: float
    fp32_tflops: float
    memory_gib: float
    tolerance: float = 0.10
    min_efficiency: float = 0.30

    def peak(self, dtype: str) -> float:
        if dtype not in DTYPES:
            raise InvalidParameter("dtype", dtype, f"must be one of {DTYPES}")
        return float(getattr(self, f"{dtype}_tflops"))

    def band(self, dtype: str) -> tuple[float, float]:
        """The accepted range of measured TFLOPS for this class and dtype."""
        peak = self.peak(dtype)
        return peak * self.min_efficiency, peak * (1.0 + self.tolerance)

    def matches(self, name: str) -> bool:
        return re.search(self.pattern, name, re.IGNORECASE) is not None


# Order matters for name matching: the first pattern that matches a device name wins.
PROFILES: tuple[GpuProfile, ...] = (
    GpuProfile("H100 SXM", r"H100.*(SXM|HBM3)", 989.4, 989.4, 66.9, 80),
    GpuProfile("H100 PCIe", r"H100", 756.0, 756.0, 51.2, 80),
    GpuProfile("H200", r"H200", 989.4, 989.4, 66.9, 141),
    GpuProfile("A100 80GB", r"A100.*80\s*GB", 312.0, 312.0, 19.5, 80),
    GpuProfile("A100 40GB", r"A100", 312.0, 312.0, 19.5, 40),
    GpuProfile("L40S", r"L40S", 362.1, 362.1, 91.6, 48),
    GpuProfile("RTX 4090", r"RTX\s*4090", 165.2, 165.2, 82.6, 24),
    GpuProfile("RTX 3090", r"RTX\s*3090", 71.0, 71.0, 35.6, 24),
    GpuProfile("A10", r"\bA10(?![0-9])", 125.0, 125.0, 31.2, 24),
    # Turing has no bf16 tensor cores: torch emulates it far below the fp16 rate.
    GpuProfile("T4", r"\bT4\b", 65.0, 8.1, 8.1, 16),
    # A CPU is its own class: any honest rate up to a large server's ceiling, small n.
    GpuProfile("CPU", r"^cpu", 8.0, 16.0, 4.0, 0.25, tolerance=0.0, min_efficiency=0.0),
)


def lookup(name: str) -> GpuProfile | None:
    """The class a device name (NVML or torch spelling) claims, or None if unknown."""
    for profile in PROFILES:
        if profile.matches(name):
            return profile
    return None


def identify(name: str, measured_tflops: float, dtype: str) -> GpuProfile:
    """The class a measurement supports, or `ClassRejected`.

    A known name must fit its own class's band. An unknown name gets the weakest class whose
    band holds the measurement, so nobody is credited above what was measured.
    """
    if not math.isfinite(measured_tflops) or measured_tflops < 0:
        raise ClassRejected(name, measured_tflops, dtype, "not a valid measurement")
    claimed = lookup(name)
    if claimed is not None:
        low, high = claimed.band(dtype)
        if not low <= measured_tflops <= high:
            raise ClassRejected(
                name, measured_tflops, dtype,
                f"outside {claimed.name}'s band [{low:.3f}, {high:.3f}] TFLOPS",
            )
        return claimed
    fits = [p for p in PROFILES if p.band(dtype)[0] <= measured_tflops <= p.band(dtype)[1]]
    if not fits:
        raise ClassRejected(name, measured_tflops, dtype, "no class within tolerance")
    return min(fits, key=lambda p: p.peak(dtype))


def n_for(profile: GpuProfile, dtype: str = "fp16", memory_share: float = 0.25) -> int:
    """The n a verifier assigns so that A, Bt and C fill `memory_share` of the class's memory."""
    if not 0 < memory_share <= 0.9:
        raise InvalidParameter("memory_share", memory_share, "must be in (0, 0.9]")
    profile.peak(dtype)
    n = math.isqrt(int(profile.memory_gib * GIB * memory_share) // BYTES_PER_ENTRY[dtype])
    return max(MIN_N, min(MAX_N, n // 64 * 64))

