"""The CPU kernels every party runs job models on: pinned to AVX2, whatever the host offers.

torch (ATen's own vectorized kernels), MKL (its BLAS) and oneDNN (its convolutions) each pick
their code path from the host's instruction set when they load: an AVX-512 provider and an
AVX2-only verifier add the same products in different orders, so an honest fp32 result moved
by 0.06-0.33 ppm in 87-92% of elements and a bf16 transformer block by 7,690 ppm (docs/
BENCHMARKS.md, "Cross-device drift"): under the default tolerance of 0 ppm the verifier
challenges an honest provider. With these variables set in a model's environment before torch
loads, every x86-64 host with AVX2 (every server CPU since 2013) runs the same code paths; fp32
pays 0-7% here, bf16 6-14x (it loses AVX512-BF16). Numpy-free, like model_formats: the sandbox
that sets them loads before either.
"""

PINNED_KERNELS = {
    "ATEN_CPU_CAPABILITY": "avx2",  # ATen's dispatch (read once, when torch loads)
    "MKL_CBWR": "AVX2",  # MKL's conditional numerical reproducibility: the AVX2 path on any CPU
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN's JIT kernels
}
