"""Waiting for a condition, never for a fixed time: a loaded machine only makes it take longer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.02) -> T:
    """Polls `condition` until it returns something truthy and returns that; after `timeout`
    seconds fails the test with `what` (the condition that never came)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        time.sleep(interval)


def holds_for(condition: Callable[[], object], seconds: float, what: str, interval: float = 0.02) -> None:
    """Checks that `condition` stays true for `seconds` (that something does NOT happen: the
    only check that needs a span of time); fails the test as soon as it is false."""
    deadline = time.monotonic() + seconds
    while True:
        if not condition():
            raise AssertionError(f"no longer true: {what}")
        if time.monotonic() >= deadline:
            return
        time.sleep(interval)
