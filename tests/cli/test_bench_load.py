"""The load benchmark's code with a tiny load: every job funded, finalized exactly once, no wei lost."""

from io import StringIO

from rich.console import Console

from devtools.bench_load import Load, percentile, run, section


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert [percentile(values, p) for p in (50, 90, 99, 100)] == [50.0, 90.0, 99.0, 100.0]
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([7.0], 99) == 7.0


def test_tiny_load_settles_every_job_exactly_once_and_loses_no_wei(tmp_path):
    load = Load(providers=2, renters=3, jobs_per_renter=2, items_per_job=2, challenge_window_s=8,
                settle_timeout_s=120)
    out = StringIO()
    result = run(load, tmp_path, Console(file=out, width=200))

    ids = {s.job.id for s in result.submitted}
    assert len(ids) == 6 and not result.submit_errors, out.getvalue()
    assert set(result.finalized) == ids and all(len(t) == 1 for t in result.finalized.values()), out.getvalue()
    assert not result.refunded and result.unaccounted == 0
    assert {s.job.provider.lower() for s in result.submitted} == set(result.providers)  # spread over both providers
    assert all(result.committed[j] >= result.created[j] for j in ids)
    # Finalization waits for the challenge window, which starts at the commit.
    assert all(result.finalized[j][0] - result.committed[j] >= load.challenge_window_s for j in ids)
    assert result.all_settled
    # The renter can fetch every result, and not before its job was funded: not before the block of
    # JobCreated (anvil stamps a block with the wall clock's second, so that block's time is a lower
    # bound). The renter's own receipt time is not one: a busy renter thread can return from its
    # funding call after the provider already delivered (a run of the suite saw that once).
    assert set(result.available) == ids, out.getvalue()
    assert all(result.available[j] >= result.created[j] for j in ids), (result.available, result.created)
    # Every kind of process that serves a job spent CPU on it.
    cpu = result.cpu.seconds
    for kind in ("anvil", "backend (", "provider agents", "provider job runs", "verifiers", "verifier re-executions",
                 "renters"):
        assert next(v for k, v in cpu.items() if k.startswith(kind)) > 0, cpu
    assert result.cpu.total <= result.cpu.wall_s * result.cpu.cores
    # Every job some verifier drew for a mandatory audit was audited inside its window; each job's
    # floor is the published one (a 2-item job is checked whole: detection 1).
    assert result.drawn <= result.audited, (result.drawn, result.audited)
    assert len(result.floors) == 6 and all(0 < f < 1 for f in result.floors), result.floors
    text = section(result)
    assert "All settled: **yes**" in text and "6 of 6 jobs finalized" in text
    assert "drawn for a mandatory audit" in text
    assert "funded (renter's receipt) -> result available" in text and "CPU s per job" in text
