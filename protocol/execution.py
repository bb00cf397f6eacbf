"""How every party runs a job's model, and the tolerance a renter gets by default (docs/PROTOCOL.md,
"Job re-execution"; the figures: docs/BENCHMARKS.md, "Cross-device drift of job outputs").

CPU kernels pinned to AVX2, whatever the host offers. torch (ATen's own vectorized kernels), MKL (its
BLAS) and oneDNN (its convolutions) each pick their code path from the host's instruction set when
they load: an AVX-512 provider and an AVX2-only verifier add the same products in different orders,
so an honest fp32 result moved by 0.06-0.36 ppm in most elements, an fp16 one by 1,876 ppm (a host
with AVX512-FP16) and a bf16 transformer block by 7,690 ppm: under a tolerance of 0 the verifier
challenged an honest provider. With these variables set in a model's environment before torch loads,
every x86-64 host with AVX2 runs the same code paths; fp32 pays nothing measurable, bf16 6-17x (it
loses AVX512-BF16).

The default tolerance covers what the pin leaves: fp32 outputs of two hosts with different torch and
MKL builds still differed by up to 0.36 ppm, a GPU's by 0.69 ppm, while the cheapest cheat on an fp32
model (running it in fp16) moved them by 183 ppm or more. 10 ppm lies between; it is below one ulp
of fp16 values of 1/64 or more, of bf16 values of 1/512 or more and of integers below 100,000, which
it therefore compares exactly.

Numpy-free, like model_formats: the sandbox that sets the variables and the renter's command help
load before either.
"""

PINNED_KERNELS = {
    "ATEN_CPU_CAPABILITY": "avx2",  # ATen's dispatch (read once, when torch loads)
    "MKL_CBWR": "AVX2",  # MKL's conditional numerical reproducibility: the AVX2 path on any CPU
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN's JIT kernels
}

DEFAULT_TOLERANCE_PPM = 10
