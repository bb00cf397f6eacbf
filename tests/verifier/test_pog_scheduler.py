"""The PoG scheduler: random offsets, interval, leases skipped, retries with backoff, bounded concurrency."""

import random
import threading
import time

import pytest

from verifier import VerifierError
from verifier.pog_scheduler import Outcome, PogScheduler, ProviderState, TransientRoundError


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def providers(*names, leased=(), inactive=()):
    return [ProviderState(n, active=n not in inactive, leased=n in leased) for n in names]


def make(run_round, **kw):
    clock = FakeClock()
    sched = PogScheduler(run_round, interval_s=100, jitter_s=10, backoff_s=5, clock=clock,
                         rng=random.Random(1), **kw)
    return sched, clock


def test_first_round_lands_at_a_random_point_of_the_jitter_window():
    ran = []
    sched, clock = make(lambda p: ran.append(p) or True)
    assert sched.tick(providers("a", "b")) == []  # planned, not run at once
    planned = [sched.next_round_at(p) for p in ("a", "b")]
    assert all(1000 <= t <= 1010 for t in planned) and planned[0] != planned[1]
    clock.now = 1010.1
    reports = sched.tick(providers("a", "b"))
    assert sorted(r.provider for r in reports) == ["a", "b"] and all(r.outcome is Outcome.PASSED for r in reports)
    # Next round one interval later (plus jitter), not before.
    clock.now = 1100
    assert sched.tick(providers("a", "b")) == []
    clock.now = 1121
    assert len(sched.tick(providers("a", "b"))) == 2


def test_leased_and_inactive_providers_are_not_benchmarked():
    ran = []
    sched, clock = make(lambda p: ran.append(p) or True)
    sched.tick(providers("a", "b", "c"))
    clock.now = 1011
    sched.tick(providers("a", "b", "c", leased={"b"}, inactive={"c"}))
    assert ran == ["a"]
    assert sched.next_round_at("b") >= 1111  # tried again one interval on


def test_transient_errors_retry_with_doubling_backoff_then_give_up_without_a_verdict():
    calls = []

    def flaky(p):
        calls.append(p)
        raise TransientRoundError("rpc timeout")

    sched, clock = make(flaky, max_retries=2)
    sched.tick(providers("a"))
    clock.now = 1011
    outcomes, delays = [], []
    for _ in range(3):
        report = sched.tick(providers("a"))[0]
        outcomes.append(report.outcome)
        delays.append(sched.next_round_at("a") - clock.now)
        clock.now = sched.next_round_at("a")
    assert outcomes == [Outcome.RETRY, Outcome.RETRY, Outcome.GAVE_UP]
    assert delays[:2] == [5, 10]
    assert delays[2] >= 100  # back to the normal interval
    assert len(calls) == 3


def test_a_failed_round_is_a_verdict_not_a_retry():
    sched, clock = make(lambda p: False)
    sched.tick(providers("a"))
    clock.now = 1011
    report = sched.tick(providers("a"))[0]
    assert report.outcome is Outcome.FAILED
    assert sched.next_round_at("a") >= 1111


def test_at_most_max_concurrent_rounds_run_at_once():
    lock = threading.Lock()
    running, peak = [0], [0]

    def slow(p):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return True

    names = [f"p{i}" for i in range(6)]
    sched, clock = make(slow, max_concurrent=2)
    sched.tick(providers(*names))
    clock.now = 1011
    assert len(sched.tick(providers(*names))) == 6
    assert peak[0] == 2


def test_nonsense_parameters_are_refused():
    with pytest.raises(VerifierError):
        PogScheduler(lambda p: True, max_concurrent=0)


def test_a_never_verified_provider_gets_its_first_round_on_the_next_tick():
    """A new provider cannot take jobs until it passes: its first round is due at once, not at a
    random point of the jitter window (which defaults to an hour)."""
    ran = []
    sched, clock = make(lambda p: ran.append(p) or True)
    fresh = [ProviderState("new", active=True, leased=False, recorded=False),
             ProviderState("old", active=True, leased=False, recorded=True)]
    reports = sched.tick(fresh)
    assert [r.provider for r in reports] == ["new"] and ran == ["new"]
    assert sched.next_round_at("new") >= clock.now + 100  # then the normal interval
    assert 1000 <= sched.next_round_at("old") <= 1010  # a verified one keeps its random offset


def test_a_new_provider_that_is_leased_or_inactive_is_not_benchmarked_at_once():
    ran = []
    sched, _ = make(lambda p: ran.append(p) or True)
    sched.tick([ProviderState("a", active=False, leased=False, recorded=False),
                ProviderState("b", active=True, leased=True, recorded=False)])
    assert ran == []
