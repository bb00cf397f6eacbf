"""The renter-latency benchmark (`unchained bench --only renter`) runs the whole market; this checks
that it measures what it says and leaves nothing behind, not how fast it is."""

import tempfile
from pathlib import Path

import pytest

from devtools import bench_renter, renter_timeline


def test_renter_bench_times_each_job_from_funding_to_signed_result_beside_both_pings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "market").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "market"))
    latency = bench_renter.measure(None, jobs=2, gap_s=0.0, keep_logs=tmp_path / "logs")
    # The first job (it caches the model) is not counted; five pings of each kind precede each counted job.
    assert len(latency.renter_ms) == 2 and len(latency.signed_ping_ms) == 10 and len(latency.bare_ping_ms) == 10
    for funding, total in zip(latency.funding_ms, latency.renter_ms):
        assert 0 < funding <= total  # the receipt, then the signed result
    assert latency.indexed_ms == []  # a long-polling renter asks once: it never sees the job without its result
    summary = bench_renter.summary(latency)
    # against the unrounded p50s: a ping of a few ms rounded to 0.1 ms moves the ratio by more than 0.1
    assert summary["renter_over_signed_ping_p50"] == pytest.approx(
        bench_renter.percentile(latency.renter_ms, 50) / bench_renter.percentile(latency.signed_ping_ms, 50), abs=0.051)
    assert list((tmp_path / "market").iterdir()) == []  # the market's chain, keystores and data are gone
    # Each timed job's stages are found in the kept logs, in the order one process logs them.
    rows = renter_timeline.timelines(latency.sent, tmp_path / "logs")
    assert [round(row["readable"], 6) for row in rows] == [round(ms, 6) for ms in latency.renter_ms]
    for row in rows:
        assert row["child"] <= row["ran"] <= row["signed"]  # the provider agent's log
        assert row["indexed"] <= row["dispatched"] and row["stored"] <= row["readable"]
