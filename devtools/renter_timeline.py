"""Where a renter's job spends its time, from the market's own logs (devtools.bench_renter with
`keep_logs`): each job's stages in ms after the renter's funding send, by the time each process
logged them (the backend's and the provider agent's log lines carry milliseconds; a line is written
just after what it reports, so a step is late by the logging itself, well under a millisecond).

Stages: the funding receipt (the bench's own clock), JobCreated indexed and committed (backend),
the job dispatched to the provider's queue (backend; its worker may log the task's start first, the
dispatch row is updated after the send), the model child ordered (provider: fetched, checked and
staged), the items run (provider), the result signed (provider), the signed result stored (backend,
inside PUT /jobs/{id}/signed-result), the result readable (the bench: its long poll answered).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

STAGES = ("receipt", "indexed", "dispatched", "child", "ran", "signed", "stored", "readable")
_BACKEND_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
_CELERY_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): ")
_BACKEND = {
    "indexed": re.compile(r"indexed JobEscrow\.JobCreated block \d+ tx (0x[0-9a-f]+)"),
    "dispatched": re.compile(r"job (\d+) dispatched to "),
    "stored": re.compile(r"job (\d+): signed result 0x"),
}
_PROVIDER = {
    "child": re.compile(r"job (\d+): model child of sandbox"),
    "ran": re.compile(r"job (\d+): \d+ items in "),
    "signed": re.compile(r"job (\d+): result signed "),
}


@dataclass(frozen=True)
class Sent:
    """One timed job as the bench saw it."""

    job_id: int
    tx_hash: str  # the funding transaction, 0x-hex lower-case
    sent_at: float  # time.time() at the send
    receipt_ms: float
    readable_ms: float


def _when(line: str, pattern: re.Pattern[str]) -> float | None:
    found = pattern.match(line)
    return datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp() if found else None


def _first_times(path: Path, clock: re.Pattern[str], patterns: dict[str, re.Pattern[str]]) -> dict[tuple[str, str], float]:
    """(stage, job id or tx hash) -> when it was first logged."""
    seen: dict[tuple[str, str], float] = {}
    for line in path.read_text(errors="replace").splitlines():
        when = _when(line, clock)
        if when is None:
            continue
        for stage, pattern in patterns.items():
            if (found := pattern.search(line)) is not None:
                seen.setdefault((stage, found[1].lower()), when)
    return seen


def timelines(sent: list[Sent], log_dir: Path, provider_log: str = "provider-1.log") -> list[dict[str, float]]:
    """Each job's stages (ms after its send) found in the logs; jobs missing a stage are left out."""
    logged = {**_first_times(log_dir / "backend.log", _BACKEND_TIME, _BACKEND),
              **_first_times(log_dir / provider_log, _CELERY_TIME, _PROVIDER)}
    rows = []
    for job in sent:
        row = {"receipt": job.receipt_ms, "readable": job.readable_ms}
        for stage in STAGES[1:-1]:
            when = logged.get((stage, job.tx_hash.lower() if stage == "indexed" else str(job.job_id)))
            if when is not None:
                row[stage] = (when - job.sent_at) * 1e3
        if len(row) == len(STAGES):
            rows.append(row)
    return rows


def summary(rows: list[dict[str, float]]) -> list[tuple[str, float, float, float]]:
    """(stage, p50 of its step from the stage before, max of that step, p50 of its time after the send)."""
    out, previous = [], None
    for stage in STAGES:
        steps = [row[stage] - (row[previous] if previous else 0.0) for row in rows]
        out.append((stage, statistics.median(steps), max(steps), statistics.median(row[stage] for row in rows)))
        previous = stage
    return out


def table(rows: list[dict[str, float]]) -> str:
    lines = [f"{len(rows)} jobs, ms after the funding send: step p50 / step max / at p50"]
    lines += [f"{stage:10s} {step:7.1f} {worst:7.1f} {at:7.1f}" for stage, step, worst, at in summary(rows)]
    return "\n".join(lines)
