"""Build keccak_triton's kernels for a GPU architecture on a machine without one: the build time
(the part of a prover's start the Triton keccak costs) and each kernel's registers and local
memory (spills), read with the cuobjdump that triton ships. A cold build each time (own cache).

`python -m devtools.bench_triton_build [--arch 90]`; needs triton (not in any extra: see
pyproject.toml). Numbers in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

# name -> (kernel, its constexprs): what the prover builds (leaves, nodes) and the generic path
SHAPES = {
    "leaf": ("_absorb_kernel", {"LANES": 32, "BSWAP": True, "PREFIX": 0, "NBLOCKS": 2}),
    "node": ("_absorb_kernel", {"LANES": 8, "BSWAP": False, "PREFIX": 1, "NBLOCKS": 1}),
    "keccak_f": ("_permute_kernel", {}),
}


def build(arch: int) -> dict[str, dict[str, float]]:
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-build-")  # cold builds
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from provider_agent import keccak_triton

    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    out = {}
    for name, (kernel_name, shape) in SHAPES.items():
        kernel = getattr(keccak_triton, kernel_name)
        constexprs = {**shape, "BLOCK_SIZE": keccak_triton.BLOCK}
        signature = {arg: "constexpr" if arg in constexprs else "i64" if arg == "count" else "*i64"
                     for arg in kernel.arg_names}
        source = ASTSource(fn=kernel, signature=signature,
                           constexprs={(kernel.arg_names.index(k),): v for k, v in constexprs.items()})
        started = time.perf_counter()
        compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32),
                                  options={"num_warps": keccak_triton._WARPS})
        row = {"build_s": round(time.perf_counter() - started, 2)}
        with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
            cubin.write(compiled.asm["cubin"])
            cubin.flush()
            usage = subprocess.run([str(cuobjdump), "-res-usage", cubin.name], capture_output=True,
                                   text=True, check=True).stdout
        for field in ("REG", "LOCAL"):
            found = re.search(rf"{field}:(\d+)", usage)
            row[field.lower()] = int(found.group(1)) if found else -1
        out[name] = row
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability x 10 (90: H100/H200)")
    args = parser.parse_args(argv)
    for name, row in build(args.arch).items():
        print(f"{name}: built in {row['build_s']} s, {row['reg']} registers, "
              f"{row['local']} bytes of local memory")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
