"""What every Python test shares: a test that runs a CLI command in-process (which configures
logging for a real terminal) must not leave the root logger writing to that command's closed
output stream for every later test."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _restore_root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
