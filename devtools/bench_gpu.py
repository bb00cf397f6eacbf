"""`unchained bench --only gpu`: the prepared check for a machine with a CUDA GPU (issue 33).

What it records, each against the datasheet where one applies (protocol/pog/profiles.py):
- device: the driver's and torch's view of every GPU (NVML identity where available);
- matmul: dense int8 (int32 out, torch._int_mm), fp16, bf16 and fp32 rates against the class's peak;
- pog: a Proof-of-GPU round at the verifier's default n (`n_for`) and at a quarter of it, played
  locally as `unchained pog run` does, with its ratio to the bare matmul and the class named;
- keccak: PoG leaves and Merkle levels on the GPU with the Triton kernel (its cold build time too)
  and the eager torch keccak, and the reference SHA-256d miner's hash rate;
- memory: sequential copy bandwidth and random 32-byte reads (what a resident-memory proof costs);
- residency, drift: the resident-fill probe and cross-device float drift, where this checkout
  has them;
- lease: a lease's sandbox (bubblewrap with the lease's GPU device nodes, seccomp filter and
  CUDA_VISIBLE_DEVICES, provider_agent.lease_env) seeing and using the device;
- colocation: the reference miner and a model job sharing the GPU under the agent's policies.

Each section runs in a child process with its own time limit, so one that hangs or breaks the
CUDA context costs only itself; the whole check stays under 8 minutes on one GPU. It needs torch,
numpy and safe-pysha3 only (the lease section also eth-account), so it runs on a GPU machine
holding none of the project's other dependencies: `python -m devtools.bench_gpu --out DIR`.
Without CUDA it says so in one line and exits 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

NO_CUDA = "No CUDA device on this machine: the GPU check measured nothing."


# The device every section measures, and whether sizes are cut down: `--device cpu` plays every
# section on the CPU at small sizes, which is how tests keep this check from rotting between the
# rare sessions that have a GPU.
DEVICE = "cuda:0"


def small() -> bool:
    return DEVICE == "cpu"


def _time(fn: Callable[[], object], warmup: int = 3, repeats: int = 10) -> float:
    """Median seconds of `fn` after warm-ups (CUDA events on a GPU)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if small():
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def _device_name() -> str:
    return "cpu" if small() else torch.cuda.get_device_properties(DEVICE).name


def _sync() -> None:
    if not small():
        torch.cuda.synchronize()


def _profile(name: str) -> Any:
    from protocol.pog.profiles import lookup

    return lookup(name)


def device_section() -> dict:
    """What the driver and torch say about each GPU."""
    out: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpus": []}
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out["gpus"].append({"index": i, "name": p.name, "uuid": str(p.uuid), "memory_gib": round(p.total_memory / 2**30, 1),
                            "sms": p.multi_processor_count, "capability": f"{p.major}.{p.minor}"})
    smi = shutil.which("nvidia-smi")
    if smi:
        fields = "name,uuid,serial,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit"
        done = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30)
        out["nvidia_smi"] = {"fields": fields, "rows": done.stdout.strip().splitlines(), "error": done.stderr.strip()}
        cc = subprocess.run([smi, "conf-compute", "-f"], capture_output=True, text=True, timeout=30)
        out["nvidia_smi_conf_compute"] = (cc.stdout + cc.stderr).strip()[-400:]
    try:
        from provider_agent.gpus import cuda_devices

        out["agent_devices"] = [{"spec": d.spec, "name": d.name, "uuid": d.uuid, "memory": d.memory_bytes}
                                for d in cuda_devices()]
    except Exception as exc:  # noqa: BLE001  reported, not fatal: the other sections still run
        out["agent_devices_error"] = repr(exc)
    try:
        from provider_agent.identity import device_identity_report
    except ImportError:
        out["identity"] = "provider_agent.identity not in this checkout"
    else:
        out["identity"] = device_identity_report()
    return out


def matmul_section() -> dict:
    """Dense rates in the PoG dtypes, against the class's datasheet peak."""
    from provider_agent.pog_prover import benchmark_tflops

    name = _device_name()
    profile = _profile(name)
    rows = []
    for dtype in ("int8", "fp32") if small() else ("int8", "fp16", "bf16", "fp32"):
        for n in (256,) if small() else (8192, 16384):
            tflops = benchmark_tflops(DEVICE, dtype, n, warmup=3, repeats=10)
            peak = profile.peak(dtype) if profile else None
            rows.append({"dtype": dtype, "n": n, "tflops": round(tflops, 1), "peak": peak,
                         "of_peak": round(tflops / peak, 3) if peak else None})
    return {"device": name, "class": profile.name if profile else None, "rows": rows}


def _default_hashing() -> str:
    from provider_agent import keccak_torch

    if small():
        return "eager"  # a CPU device hashes on the host: the choice is not used
    os.environ["UNCHAINED_TORCH_KECCAK"] = "triton"
    if keccak_torch.device_ready(DEVICE):
        return "triton"
    keccak_torch.device_ready.cache_clear()
    return "eager"


def pog_section() -> dict:
    """A whole round (prove, self-challenge, check, identify) on GPU 0 at the verifier's n."""
    from protocol.pog.profiles import identifiable_floor, n_for
    from provider_agent.gpus import cpu_device, cuda_devices
    from provider_agent.pog_local import local_round
    from provider_agent.pog_prover import default_dtype

    # Rounds hash with the prover's default, the Triton kernel, where it builds and is bit-exact
    # here, else with the eager keccak (so that a broken kernel still leaves a round measured);
    # UNCHAINED_TORCH_KECCAK overrides.
    hashing = os.environ.get("UNCHAINED_TORCH_KECCAK") or _default_hashing()
    os.environ["UNCHAINED_TORCH_KECCAK"] = hashing
    device = cpu_device() if small() else cuda_devices()[0]
    profile = _profile(device.name)
    dtype = default_dtype(device)
    full = 512 if small() else n_for(profile, dtype) if profile else 16384
    rows = []
    for n in (full // 4 // 64 * 64, full):
        print(f"pog n={n} started", file=sys.stderr, flush=True)
        result = local_round([device], {0: n}, dtype, 32,
                             lambda done, total: print(f"  rows {done}/{total}", file=sys.stderr, flush=True))[0]
        t = result.work.timings
        rows.append({"n": n, "dtype": dtype, "seed_to_root_s": round(t.seed_to_root, 3),
                     "generate_s": round(t.generate, 3), "matmul_s": round(t.matmul, 3),
                     "commit_s": round(t.commit, 3), "round_tflops": round(result.work.tflops, 1),
                     "bare_tflops": round(result.dense_tflops, 1), "round_over_bare": round(result.overhead, 3),
                     "of_peak": round(result.work.tflops / profile.peak(dtype), 3) if profile else None,
                     "verify_s": round(result.verify_s, 4), "class": result.gpu_class, "failure": result.failure,
                     "unidentified": result.unidentified, "proven_devices": result.proven_devices})
    return {"device": device.name, "hashing": hashing, "rows": rows,
            "identifiable_floor_1gpu": round(identifiable_floor(profile, 1), 1) if profile else None}


def _leaf_rate(permutation: Any, leaves: int) -> dict:
    from provider_agent import keccak_torch

    values = torch.randint(-2**31, 2**31 - 1, (leaves, 64), dtype=torch.int32, device=DEVICE)
    seconds = _time(lambda: keccak_torch.leaf_hashes(values, permutation), warmup=1, repeats=3)
    digests = keccak_torch.leaf_hashes(values[: leaves // 4], permutation)
    tree_s = _time(lambda: keccak_torch.tree_levels(digests, permutation), warmup=1, repeats=3)
    return {"leaves": leaves, "seconds": round(seconds, 3), "gb_per_s": round(values.numel() * 4 / seconds / 1e9, 2),
            "mleaves_per_s": round(leaves / seconds / 1e6, 1),
            "tree_mnodes_per_s": round(digests.shape[0] / tree_s / 1e6, 1)}


def _triton_keccak() -> dict:
    """The hand-written Triton kernel (provider_agent.keccak_triton): its cold build (a fresh
    Triton cache: the leaf and node kernels, with keccak_torch's bit-exact check) and its rates."""
    from provider_agent import keccak_torch

    if small():  # Triton kernels run on GPUs (on a CPU only under its interpreter, at numpy speed)
        return {"skipped": "the CPU dry run does not run Triton kernels"}
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")  # this child's own
    if keccak_torch._triton() is None:
        return {"skipped": "triton does not import"}
    os.environ["UNCHAINED_TORCH_KECCAK"] = "triton"
    t = time.perf_counter()
    ready = keccak_torch.device_ready(DEVICE)
    out: dict[str, Any] = {"compile_and_check_s": round(time.perf_counter() - t, 2), "ready": ready}
    if ready:
        out.update(_leaf_rate(keccak_torch.chosen_permutation(), 1 << 24))
    return out


def keccak_section() -> dict:
    """PoG leaf hashing and Merkle levels on the device with the Triton kernel (the prover's
    default) and the eager torch keccak, and the reference SHA-256d miner's hash rate."""
    from provider_agent import keccak_torch
    from provider_agent.mining import ReferenceMiner

    out: dict[str, Any] = {"triton": _triton_keccak(),
                           "eager": _leaf_rate(keccak_torch.permute, 1 << 10 if small() else 1 << 24)}
    miner = ReferenceMiner(device=DEVICE, batch=1 << 12 if small() else 1 << 22)
    miner.start()
    time.sleep(1.0 if small() else 4.0)  # the miner's rate is a sliding window over its batches
    out["sha256d_mhash_per_s"] = round(miner.hashrate() / 1e6, 1)
    miner.stop()
    return out


def keccak_compiled_section() -> dict:
    """The same with the kernel torch.compile fuses (its first build is the cost in question)."""
    from provider_agent import keccak_torch

    if small():  # a minute of compiling on a CPU says nothing about a GPU
        return {"skipped": "the CPU dry run does not compile"}
    os.environ["UNCHAINED_TORCH_KECCAK"] = "compiled"
    t = time.perf_counter()
    ready = keccak_torch.device_ready(DEVICE)
    out: dict[str, Any] = {"compile_and_check_s": round(time.perf_counter() - t, 1), "ready": ready}
    if ready:
        out["compiled"] = _leaf_rate(keccak_torch.compiled_permutation(), 1 << 24)
    return out


def memory_section() -> dict:
    """Sequential copy and random 32-byte reads over a large buffer (what residency costs)."""
    gib = 1 / 16 if small() else 16
    rows = torch.empty(int(gib * (1 << 30)) // 32, 32, dtype=torch.uint8, device=DEVICE)
    rows.random_(0, 256)
    copy_s = _time(lambda: rows.clone(), warmup=1, repeats=5)
    out = {"buffer_gib": gib, "copy_gb_per_s": round(2 * rows.numel() / copy_s / 1e9, 1)}
    for reads in (1 << 12, 1 << 16) if small() else (1 << 20, 1 << 26):
        index = torch.randint(0, rows.shape[0], (reads,), device=DEVICE)
        seconds = _time(lambda index=index: rows.index_select(0, index))
        out[f"random_32B_reads_{reads}"] = {"seconds": round(seconds, 5), "mreads_per_s": round(reads / seconds / 1e6, 1),
                                            "gb_per_s": round(reads * 32 / seconds / 1e9, 1)}
    return out


def residency_section() -> dict:
    try:
        from devtools.bench_residency import residency_probe_bench
    except ImportError:
        return {"skipped": "devtools.bench_residency not in this checkout"}
    if small():
        return residency_probe_bench(DEVICE, 1 << 20)
    free, _ = torch.cuda.mem_get_info(DEVICE)
    return residency_probe_bench(DEVICE, int(free * 0.55) >> 30 << 30)


def drift_section() -> dict:
    try:
        from devtools.bench_drift import measure_drift
    except ImportError:
        return {"skipped": "devtools.bench_drift not in this checkout"}
    return measure_drift(["cpu"] if small() else ["cpu", DEVICE])


_LEASE_PROBE = ("import os, torch; n = torch.cuda.device_count(); "
                "x = torch.ones(1024, 1024, device='cuda') if n else None; "
                "print(os.environ.get('CUDA_VISIBLE_DEVICES'), n, torch.cuda.get_device_name(0) if n else '', "
                "float((x @ x).sum()) if n else 0.0, sorted(p for p in os.listdir('/dev') if p.startswith('nvidia')))")


def lease_section() -> dict:
    """The lease sandbox's GPU exposure: bubblewrap with exactly the lease's device nodes, its
    seccomp filter and its CUDA_VISIBLE_DEVICES, as an unprivileged uid, running torch. A full
    lease (sshd, slirp4netns, a lease disk) runs where its tools are installed; the GPU machines
    here have none of them, so this checks the part a GPU changes."""
    # lease_sandbox and lease_seccomp need the standard library only (lease_env needs eth-account).
    from provider_agent.lease_sandbox import (LEASE_TOOLS, cuda_visible_devices, device_binds, gpu_device_nodes,
                                              sandbox_argv)
    from provider_agent.lease_seccomp import program

    bwrap = shutil.which("bwrap") or os.environ.get("UNCHAINED_BWRAP")
    if not bwrap:
        return {"skipped": "bubblewrap not installed"}
    missing = [tool for tool in LEASE_TOOLS if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()]
    full = f"no full lease here: missing {', '.join(missing)}" if missing else \
        "tools for a full lease present (not run by this check)"
    nodes = gpu_device_nodes(Path("/dev"), [0])
    with tempfile.TemporaryDirectory() as work:
        seccomp = Path(work, "seccomp.bpf")
        seccomp.write_bytes(program())
        fd = os.open(seccomp, os.O_RDONLY)
        python_dirs = {str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix, *sys.path) if p and Path(p).exists()}
        # The host's system read-only instead of lease_boot's staged disk (which needs root and a lease).
        root = ["--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                "--symlink", "usr/bin", "/bin", "--ro-bind", "/etc", "/etc", "--tmpfs", "/tmp"]
        for path in sorted(python_dirs):
            root += ["--ro-bind", path, path]
        for extra in ("/usr/local/nvidia", "/opt"):
            if Path(extra).exists():
                root += ["--ro-bind", extra, extra]
        argv = sandbox_argv(bwrap, root, device_binds([(str(node), node.name) for node in nodes]), fd,
                            [sys.executable, "-c", _LEASE_PROBE],
                            options=["--setenv", "CUDA_VISIBLE_DEVICES", cuda_visible_devices([0]),
                                     "--setenv", "PATH", "/usr/bin:/bin"])
        env = {k: v for k, v in os.environ.items() if k.startswith(("LD_LIBRARY_PATH", "PYTHONPATH"))}
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120, pass_fds=(fd,), env=env)
        finally:
            os.close(fd)
    return {"full_lease": full, "device_nodes": [str(n) for n in nodes], "returncode": done.returncode,
            "inside": done.stdout.strip()[-600:], "stderr": done.stderr.strip()[-1200:]}


def colocation_section(seconds: float = 3.0) -> dict:
    """The reference miner and a model job (a 8192-wide fp16 MLP) on one GPU: each alone, then
    together under the agent's policies (provider_agent.mining)."""
    from devtools.colocation import under_policies
    from provider_agent.mining import ReferenceMiner

    torch.manual_seed(0)
    width, rows, dtype = (256, 64, torch.float32) if small() else (8192, 4096, torch.float16)
    layers = [torch.randn(width, width, dtype=dtype, device=DEVICE) / width**0.5 for _ in range(4)]
    batch = torch.randn(rows, width, dtype=dtype, device=DEVICE)

    def job(items: int = 40) -> float:
        """Items (batches) per second of the model job."""
        _sync()
        t = time.perf_counter()
        for _ in range(items):
            x = batch
            for w in layers:
                x = torch.relu(x @ w)
        _sync()
        return items / (time.perf_counter() - t)

    job(5)
    items = 40 if small() else max(40, int(2.0 * job()))  # about 2 s alone: many of the miner's batches
    miner = ReferenceMiner(device=DEVICE, batch=1 << 12 if small() else 1 << 22)
    miner.start()
    time.sleep(1.0 if small() else seconds)
    solo_hashes = miner.hashrate()
    miner.pause()
    solo_job = statistics.median(job(items) for _ in range(3))
    out: dict[str, Any] = {"hashrate_solo_mhps": round(solo_hashes / 1e6, 1), "job_solo_items_per_s": round(solo_job, 2)}
    out.update(under_policies(miner, lambda: job(items), items, solo_hashes, solo_job, 0.5 if small() else 1.0))
    miner.stop()
    return out


# name -> (what it measures, time limit in seconds): 8 minutes in all at the worst.
SECTIONS: dict[str, tuple[Callable[[], dict], int]] = {
    "device": (device_section, 20),
    "matmul": (matmul_section, 40),
    "keccak": (keccak_section, 80),  # the Triton kernels' cold build included
    "pog": (pog_section, 110),
    "memory": (memory_section, 20),
    "residency": (residency_section, 50),
    "drift": (drift_section, 40),
    "lease": (lease_section, 20),
    "colocation": (colocation_section, 40),
    # last: torch.compile's build (over 150 s on the H200 so far) gets what the 8 minutes leave
    "keccak_compiled": (keccak_compiled_section, 60),
}


def run_section(name: str) -> dict:
    fn, _ = SECTIONS[name]
    started = time.perf_counter()
    try:
        result = fn()
    except Exception:  # noqa: BLE001  one section's failure is a result: the others still run
        result = {"error": traceback.format_exc()[-2000:]}
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return result


def run_all(out_dir: Path, names: list[str]) -> dict[str, dict]:
    """Each section in a child process under its limit; results appended to gpu.jsonl as they come."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    log = out_dir / "gpu.jsonl"
    for name in names:
        limit = SECTIONS[name][1]
        print(f"[bench gpu] {name} (limit {limit} s)", flush=True)
        try:
            done = subprocess.run([sys.executable, "-m", "devtools.bench_gpu", "--device", DEVICE, "--section", name],
                                  capture_output=True, text=True, timeout=limit)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            result = json.loads(lines[-1]) if lines else {"error": f"exit {done.returncode}: {done.stderr[-1500:]}"}
        except subprocess.TimeoutExpired as exc:
            result = {"error": f"over its {limit} s limit", "stderr": (exc.stderr or b"")[-800:].decode(errors="replace")
                      if isinstance(exc.stderr, bytes) else str(exc.stderr or "")[-800:]}
        results[name] = result
        with log.open("a") as f:
            f.write(json.dumps({name: result}) + "\n")
        print(json.dumps(result)[:1500], flush=True)
    (out_dir / "gpu.md").write_text(render(results))
    return results


def render(results: dict[str, dict]) -> str:
    """The markdown section for docs/BENCHMARKS.md."""
    lines = ["## GPU (the prepared check, `unchained bench --only gpu`; method: devtools/bench_gpu.py)", ""]
    dev = results.get("device", {})
    for gpu in dev.get("gpus", []):
        lines.append(f"Device: {gpu['name']}, {gpu['memory_gib']} GiB, {gpu['sms']} SMs, compute {gpu['capability']}; "
                     f"torch {dev.get('torch')}, CUDA {dev.get('cuda')}.")
    mm = results.get("matmul", {})
    if mm.get("rows"):
        lines += ["", f"Dense matmul against the {mm.get('class')} datasheet peak:", "",
                  "| dtype | n | TFLOPS | peak | of peak |", "| --- | ---: | ---: | ---: | ---: |"]
        lines += [f"| {r['dtype']} | {r['n']} | {r['tflops']} | {r['peak']} | {r['of_peak']} |" for r in mm["rows"]]
    pog = results.get("pog", {})
    if pog.get("rows"):
        lines += ["", "PoG round on one GPU (k = 32, self-checked as a verifier does):", "",
                  "| n | dtype | seed-to-root s | generate s | matmul s | commit s | round TOPS | bare TOPS "
                  "| round / bare | of int8 peak | verifier s | class |",
                  "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for r in pog["rows"]:
            verdict = r["class"] or r["failure"] or f"unidentified: {r['unidentified']}"
            lines.append(f"| {r['n']} | {r['dtype']} | {r['seed_to_root_s']} | {r['generate_s']} | {r['matmul_s']} "
                         f"| {r['commit_s']} | {r['round_tflops']} | {r['bare_tflops']} | {r['round_over_bare']} "
                         f"| {r['of_peak']} | {r['verify_s']} | {verdict} |")
    for name in ("keccak", "keccak_compiled", "memory", "residency", "drift", "lease", "colocation"):
        if name in results:
            lines += ["", f"{name}: `{json.dumps(results[name])[:3000]}`"]
    failed = [n for n, r in results.items() if "error" in r]
    if failed:
        lines += ["", f"Sections that failed: {', '.join(failed)} (errors in gpu.jsonl)."]
    return "\n".join(lines) + "\n"


def gpu_section() -> str:
    """For `unchained bench --only gpu`: every section, or one line where there is no CUDA."""
    if not torch.cuda.is_available():
        return NO_CUDA
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as work:
        return render(run_all(Path(work), list(SECTIONS)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=sorted(SECTIONS), help="run one section here and print its JSON")
    parser.add_argument("--only", nargs="*", choices=sorted(SECTIONS), help="sections to run (default: all)")
    parser.add_argument("--out", type=Path, default=Path("bench-gpu"), help="where gpu.jsonl and gpu.md go")
    parser.add_argument("--device", default="cuda:0",
                        help="cuda:N, or cpu for a dry run of every section at small sizes")
    args = parser.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    if not small() and not torch.cuda.is_available():
        print(NO_CUDA)
        return 0
    if args.section:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
        print(json.dumps(run_section(args.section)), flush=True)
        return 0
    results = run_all(args.out, args.only or list(SECTIONS))
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
