"""The dispatch benchmark (`unchained bench --only dispatch`) runs a real worker on a real chain and
broker; this checks that it measures what it says and leaves nothing behind, not how fast it is."""

import tempfile
from pathlib import Path

import pytest

from devtools import bench_provider


def test_dispatch_bench_times_pings_and_real_jobs_and_removes_its_files(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = bench_provider.dispatch(rounds=2, gap_s=0.0)
    # The first job (it caches the model) is not counted; five pings precede each counted job.
    assert len(result["each_job_ms"]) == 2 and len(result["each_ping_ms"]) == 10
    assert all(ms > 0 for ms in result["each_job_ms"] + result["each_ping_ms"])
    assert result["ratio"] == pytest.approx(result["market_noop_job_ms"] / result["ping_round_trip_ms"], abs=0.1)
    assert list(tmp_path.iterdir()) == []  # its chain, keystore, content and worker data are gone
