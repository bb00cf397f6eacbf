"""Mining beside a job under the agent's policies (provider_agent.mining): what the CPU bench
(devtools/bench_provider.py) and the GPU check (devtools/bench_gpu.py) both measure."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from provider_agent.mining import MiningPolicy, MiningSupervisor, ReferenceMiner

POLICIES = (("yield", MiningPolicy("yield", cooldown_s=0.2)),
            ("co-run duty 1.0", MiningPolicy("co-run", 1.0, 0.2)),
            ("co-run duty 0.25", MiningPolicy("co-run", 0.25, 0.2)))


def under_policies(miner: ReferenceMiner, run_job: Callable[[], float], items: int, solo_hashes: float,
                   solo_job: float, settle_s: float = 1.0) -> dict[str, dict[str, Any]]:
    """For each policy: the miner mining (`settle_s` to fill its rate window), then `run_job`
    (returning items per second) under the supervisor; what each side kept of its solo rate."""
    results: dict[str, dict[str, Any]] = {}
    for name, policy in POLICIES:
        supervisor = MiningSupervisor(miner, policy)
        miner.set_duty(1.0)
        miner.resume()
        supervisor.state = "mining"
        time.sleep(settle_s)
        start_hashes, t = miner.hashes, time.perf_counter()
        supervisor.job_started(1)
        throughput = run_job()
        during = (miner.hashes - start_hashes) / (time.perf_counter() - t)
        supervisor.job_finished(1, items, items / throughput)
        t_end = time.perf_counter()
        while supervisor.state != "mining" and time.perf_counter() - t_end < 5:
            time.sleep(0.005)
        resume_s = time.perf_counter() - t_end if supervisor.state == "mining" else None
        kept_h, kept_j = (during / solo_hashes if solo_hashes else 0.0), throughput / solo_job
        results[name] = {
            "hashrate_during_job_hps": round(during), "hashrate_kept": round(kept_h, 3),
            "job_items_per_s": round(throughput, 2), "job_throughput_kept": round(kept_j, 3),
            "score": round(kept_h + kept_j, 3),
            "pause_latency_ms": round(supervisor.telemetry.switches[-1] * 1e3, 1) if supervisor.telemetry.switches else None,
            "resume_after_job_ms (cooldown 200)": round(resume_s * 1e3, 1) if resume_s is not None else None,
        }
    return results
