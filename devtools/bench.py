"""`unchained bench`: runs the project's benchmarks and rewrites docs/BENCHMARKS.md."""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from devtools import bench_gas

if TYPE_CHECKING:  # bench_load imports torch and the market: only the load section needs them
    from devtools.bench_load import Load

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = REPO_ROOT / "docs" / "BENCHMARKS.md"
# Everything from this heading on is written by hand (earlier runs, what changed and why); a full run
# rewrites the file above it and keeps it.
NOTES_HEADING = "## Notes and earlier runs"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def gas_section() -> str:
    lines = [
        "## Gas (anvil, solc 0.8.24 optimizer 200 runs)",
        "",
        "| step | gas | goal | within goal |",
        "| --- | ---: | ---: | --- |",
    ]
    for row in bench_gas.measure():
        goal = f"{row.goal:,}" if row.goal else ""
        ok = "" if row.goal is None else ("yes" if row.gas <= row.goal else "**no**")
        lines.append(f"| {row.step} | {row.gas:,} | {goal} | {ok} |")
    lines += ["", "Method: devtools/bench_gas.py (uniform trees stand in for big commitments; see its docstring)."]
    return "\n".join(lines)


def run(selected: list[str] | None = None, path: Path = BENCHMARKS_MD, load: Load | None = None) -> str:
    """Runs the selected sections (all by default), the load section with `load` (the default
    load when None). Only a full run rewrites `path`, so its top always holds one consistent
    run of every benchmark; the hand-written notes from NOTES_HEADING on are kept."""
    names = selected or list(SECTIONS)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; known: {sorted(SECTIONS)}")
    sections = {**SECTIONS, "load": lambda: load_section(load)}
    header = [
        "# Benchmarks",
        "",
        f"Command: `unchained bench{''.join(f' --only {n}' for n in selected or [])}{load_options(load) if load else ''}`  ",
        f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
        f"Machine: {machine()}  ",
        f"Load average at the start (other work on the machine skews timings): {os.getloadavg()[0]:.2f}",
        "",
        "",
    ]
    text = "\n".join(header) + "\n\n".join(sections[n]() for n in names) + "\n"
    if selected is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + kept_notes(path))
    return text


def kept_notes(path: Path) -> str:
    try:
        old = path.read_text()
    except FileNotFoundError:
        return ""
    start = old.find(f"\n{NOTES_HEADING}")
    return "" if start < 0 else old[start:]


def pog_section() -> str:
    """Proof-of-GPU overhead and verifier cost on this machine's CPU (GPUs: see the device runs)."""
    from provider_agent.gpus import cpu_device
    from provider_agent.pog_local import local_round

    device = cpu_device()
    lines = [
        "## Proof of GPU (CPU path, fp32, k=32)",
        "",
        "| n | bare matmul s | seed-to-root s | round / bare matmul (goal <= 1.5 at n=2048) "
        "| generate s | matmul s | commit s | verifier CPU s | verifier / prover (goal <= 0.05 at n>=4096) | class |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for n in (2048, 4096):
        # Best of three rounds: the figure of merit is what the hardware can do, not the noise.
        best = min((local_round([device], {0: n}, "fp32", 32)[0] for _ in range(3)), key=lambda r: r.overhead)
        t = best.work.timings
        bare = 2 * n**3 / best.dense_tflops / 1e12
        lines.append(
            f"| {n} | {bare:.3f} | {t.seed_to_root:.3f} | {best.overhead:.2f} | {t.generate:.3f} | {t.matmul:.3f} "
            f"| {t.commit:.3f} | {best.verify_s:.4f} | {best.verify_ratio:.4f} | {best.gpu_class or best.failure} |"
        )
    lines += ["", "Method: provider_agent/pog_local.py (the round `unchained pog run` plays), best of 3 per n."]
    return "\n".join(lines)


def dispatch_section() -> str:
    from devtools import bench_provider

    lines = [
        "## Dispatch overhead (anvil + private Redis + one provider worker, no-op job)",
        "",
        "| jobs arrive | ping round trip ms | no-op job through the market ms | ratio (goal <= 3) "
        "| renter's funding tx ms |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for gap in (2.0, 0.0):
        r = bench_provider.dispatch(rounds=16, gap_s=gap)
        when = f"{gap:.0f} s apart" if gap else "back to back"
        lines.append(f"| {when} | {r['ping_round_trip_ms']} | {r['market_noop_job_ms']} | {r['ratio']} "
                     f"| {r['renter_funding_tx_ms']} |")
    lines += ["", "Both spans run from sending the signed task to holding the worker's checked, signed reply; "
              "medians of 16 jobs, each right after 5 pings (the first job, which caches the model, not "
              "counted). The job's reply comes when the worker has its result, computed in a fresh child "
              "forked from a warm sandboxed template (client/sandbox.py); where the worker commits before "
              "replying, the chain's steps are in the span. "
              "Command: `unchained bench --only dispatch`; method: devtools/bench_provider.py `dispatch`."]
    return "\n".join(lines)


def renter_section() -> str:
    from devtools import bench_renter

    lines = [
        "## Renter-visible latency (the whole market: anvil, Redis with a user per party, the backend, one "
        "provider worker; a no-op job of one item)",
        "",
        "| chain | funding send -> signed result readable ms p50 / p99 | funding tx ms p50 / p99 | indexed ms p50 "
        "| worker's signed ping ms p50 / p99 | bare Celery ping ms p50 / p99 | renter / signed ping (goal <= 3) "
        "| renter / bare ping |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for block_time in (None, 1.0):
        r = bench_renter.summary(bench_renter.measure(block_time))
        lines.append(f"| {r['chain']} | {r['renter_p50_ms']} / {r['renter_p99_ms']} "
                     f"| {r['funding_p50_ms']} / {r['funding_p99_ms']} | {r['indexed_p50_ms'] or '-'} "
                     f"| {r['signed_ping_p50_ms']} / {r['signed_ping_p99_ms']} "
                     f"| {r['bare_ping_p50_ms']} / {r['bare_ping_p99_ms']} "
                     f"| {r['renter_over_signed_ping_p50']} | {r['renter_over_bare_ping_p50']} |")
    lines += ["", "The renter's span runs from its createJob send (sign, send, receipt) until `GET /jobs/{id}/result"
              "?wait=S` (a long poll, answered when the backend stores the result) returns the provider's signed "
              "result: the backend indexes JobCreated, dispatches, the worker runs the job and delivers its signed "
              "result. indexed (when the job is first readable) is seen only by the polling renter "
              "(`measure(..., long_poll=False)`). 20 jobs per chain, 0.5 s apart plus a random part of "
              "a block, each after 5 pings of each kind through the same Redis (the bare one to a "
              "plain Celery worker, the signed one to the provider's worker that runs the jobs); ratios of the "
              "p50s. Command: `unchained bench --only renter`; method: devtools/bench_renter.py."]
    return "\n".join(lines)


def colocation_section() -> str:
    from devtools import bench_provider

    r = bench_provider.colocation(items=384, seconds=3.0)
    lines = [
        "## Mining co-location (CPU: reference SHA-256d miner on one thread, a 512-wide MLP job on one thread)",
        "",
        f"Solo: {r['hashrate_solo_hps']:,} H/s; {r['job_solo_items_per_s']} items/s.",
        "",
        "| policy | hash rate kept | job throughput kept | score | pause latency ms | resume after job ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in ("yield", "co-run duty 1.0", "co-run duty 0.25"):
        p = r[name]
        lines.append(f"| {name} | {p['hashrate_kept']:.0%} | {p['job_throughput_kept']:.0%} | {p['score']} "
                     f"| {p['pause_latency_ms']} | {p['resume_after_job_ms (cooldown 200)']} |")
    lines += ["", "On this 2-core CPU the miner and the job each get a core, so co-running is nearly free here; "
              "it says nothing about sharing one GPU (no GPU was available). Anchor: the seed's co-mining kept "
              "100% of hash rate and 8.7% of solo inference. Method: devtools/bench_provider.py `colocation`."]
    return "\n".join(lines)


def load_options(load: Load) -> str:
    """The command-line options that ask for `load` (none for the default load)."""
    from devtools.bench_load import Load

    default = Load()
    options = [("jobs", load.jobs, default.jobs), ("renters", load.renters, default.renters),
               ("providers", load.providers, default.providers),
               ("items", load.items_per_job, default.items_per_job)]
    return "".join(f" --{name} {value}" for name, value, usual in options if value != usual)


def load_section(load: Load | None = None) -> str:
    from devtools import bench_load

    return bench_load.load_section(load or bench_load.Load())


def startup_section() -> str:
    """How long `unchained` takes to start (goal: under 1 s for --help and every read command)."""
    from devtools import bench_startup

    return "\n".join(["## Start-up of `unchained` (best of 5; goal under 1 s wall for --help and the reads)", "",
                      bench_startup.report([bench_startup.REPO_ROOT], 5), "",
                      "Method: devtools/bench_startup.py (also `python -m devtools.bench_startup --root A --root B` "
                      "to compare two trees)."])


def gpu_section() -> str:
    """The prepared GPU check (devtools/bench_gpu.py); one line where there is no CUDA."""
    from devtools import bench_gpu

    return bench_gpu.gpu_section()


SECTIONS: dict[str, Callable[[], str]] = {
    "gas": gas_section, "pog": pog_section, "dispatch": dispatch_section, "renter": renter_section,
    "colocation": colocation_section, "startup": startup_section, "gpu": gpu_section,
    "load": load_section,
}
