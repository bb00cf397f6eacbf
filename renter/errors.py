"""Errors of the renter's side. Each is shown as its message, one line (unchained_cli/errors.py):
the message says what went wrong and what to do."""

from __future__ import annotations


class RenterError(Exception):
    """Root of every error the renter's side raises on purpose."""


class NotFound(RenterError):
    def __init__(self, what: str, key: object) -> None:
        super().__init__(f"{what} {key} not found")
        self.what, self.key = what, key


class Conflict(RenterError):
    """What the renter asked for contradicts the state of the lease or job."""
