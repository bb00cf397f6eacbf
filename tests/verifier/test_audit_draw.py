"""Which jobs a verifier must audit: floors that make cheating a loss, secret draws, and the order
a busy verifier audits in (drawn jobs first, by the end of their windows)."""

from __future__ import annotations

import pytest

from client.escrow_jobs import JobView
from protocol.enums import JobStatus
from protocol.escrow_job import EscrowJob
from protocol.ids import JobId
from tests.support.accounts import dev_account
from verifier import VerifierError
from verifier.audit_draw import AuditDraw, audit_floor, detection_probability
from verifier.job_audit import audit_order

ETH = 10**18
ESCROW = "0x" + "ab" * 20


def cheating_gain(price: int, slash: int, p: float, detection: float) -> float:
    """What skipping a job's work gains over doing it, when the work costs its whole price (the
    most it can cost a provider that took the job): the cost saved, minus what a caught cheat
    loses (the price, refunded to the renter, and the slash)."""
    caught = p * detection
    return price - caught * (price + slash)


def test_the_floor_is_where_cheating_stops_paying_times_the_safety_factor():
    for price, slash in ((ETH // 20, ETH), (ETH, ETH), (ETH // 1000, 3 * ETH), (5 * ETH, ETH)):
        for detection in (0.5, 0.9, 0.99, 1.0):
            floor = audit_floor(price, slash, detection, safety=1.0)
            if floor < 1.0:
                assert cheating_gain(price, slash, floor, detection) == pytest.approx(0, abs=1e-9 * price)
                assert cheating_gain(price, slash, floor * 0.99, detection) > 0
            else:  # even auditing every job cannot make cheating a loss: the floor is every job
                assert cheating_gain(price, slash, 1.0, detection) >= 0
            assert audit_floor(price, slash, detection) == min(1.0, 2 * floor)


def test_a_cheaper_job_or_a_larger_slash_needs_fewer_audits():
    assert audit_floor(ETH // 100, ETH, 0.99) < audit_floor(ETH // 10, ETH, 0.99) < audit_floor(ETH, ETH, 0.99)
    assert audit_floor(ETH // 10, 2 * ETH, 0.99) < audit_floor(ETH // 10, ETH, 0.99)
    assert audit_floor(0, ETH, 0.99) == 0.0
    assert audit_floor(10 * ETH, 0, 0.99) == 1.0  # nothing to slash: every job


def test_bad_policies_are_refused():
    with pytest.raises(VerifierError):
        audit_floor(ETH, ETH, 0.0)
    with pytest.raises(VerifierError):
        audit_floor(ETH, ETH, 0.9, safety=0.5)
    with pytest.raises(VerifierError):
        audit_floor(-1, ETH, 0.9)


def test_detection_covers_every_item_of_a_small_job():
    assert detection_probability(4) == 1.0
    assert detection_probability(44) == 1.0
    assert detection_probability(10_000) == pytest.approx(1 - 0.9**44)


def test_draws_are_uniform_stable_across_restarts_and_differ_between_verifiers():
    one = AuditDraw.for_account(dev_account(5), ETH)
    again = AuditDraw.for_account(dev_account(5), ETH)
    other = AuditDraw.for_account(dev_account(6), ETH)
    ids = range(1, 20_001)
    draws = [one.draw(ESCROW, j) for j in ids]
    assert draws == [again.draw(ESCROW, j) for j in ids]  # a restarted verifier draws the same jobs
    assert all(0 <= d < 1 for d in draws)
    for p in (0.05, 0.3, 0.7):
        assert abs(sum(d < p for d in draws) / len(draws) - p) < 0.015
    theirs = [other.draw(ESCROW, j) for j in ids]
    both = sum(a < 0.3 and b < 0.3 for a, b in zip(draws, theirs)) / len(draws)
    assert abs(both - 0.09) < 0.015  # independent of another verifier's draws
    assert [one.draw("0x" + "cd" * 20, j) for j in range(1, 50)] != draws[:49]  # per deployment


def test_must_audit_follows_the_floor():
    draw = AuditDraw.for_account(dev_account(5), ETH)
    cheap = [j for j in range(1, 5_001) if draw.must_audit(ESCROW, j, ETH // 100, 1_000)]
    costly = [j for j in range(1, 5_001) if draw.must_audit(ESCROW, j, ETH, 1_000)]
    assert abs(len(cheap) / 5_000 - draw.floor(ETH // 100, 1_000)) < 0.02
    assert len(costly) == 5_000  # a job as costly as the slash: every one
    assert set(cheap) <= set(costly)


def view(job_id: int, window_end: int) -> tuple[JobId, JobView]:
    job = EscrowJob(job_id, "0x" + "11" * 20, "0x" + "22" * 20, "0x" + "00" * 20, ETH, bytes(32), 10**9)
    return JobId(job_id), JobView(job, JobStatus.COMMITTED, False, window_end, window_end - 20, 0)


def test_a_busy_verifier_audits_every_drawn_job_first_then_the_others_by_window_end():
    due = [view(1, 150), view(2, 120), view(3, 110), view(4, 130), view(5, 100), view(6, 140)]
    drawn = {2, 4, 6}
    order = audit_order(due, lambda e: e[0] in drawn)
    assert [j for j, _ in order] == [2, 4, 6, 5, 3, 1]  # drawn by window end, then the undrawn ones
    assert [j for j, _ in audit_order(due, lambda e: False)] == [5, 3, 2, 4, 6, 1]
