"""What every Python test shares (the helpers live in tests/support/):

- `chains`: the session's anvil chains with the contract set deployed once (tests/support/chain.py);
  `shared_chain`: the module's chain as just deployed, of the kind UNCHAINED_TEST_BLOCK_TIME names
  (unset: a block a second for a module marked `block_time`, else instant mining).
- `redis_url`: a private redis-server for each module (its queues and results never reach the next
  module's workers).
- A test that runs a CLI command in-process (which configures logging for a real terminal) must
  not leave the root logger writing to that command's closed output stream for every later test.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# `tests.support` and `tests.tiny_models` import from the repository root, also under a bare
# `pytest` (which puts only the test directories on sys.path).
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from protocol.execution import PINNED_KERNELS  # noqa: E402
from tests.support.chain import SharedChain, SharedChains, module_block_time  # noqa: E402

# A test's in-process reference (protocol.inference run here) computes in the protocol's
# execution mode, as the sandbox's model children do; torch reads these when it first loads.
os.environ.update(PINNED_KERNELS)
from tests.support.redis import private_redis  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with a `slow` test first, each module's tests kept together and in order: the
    test command spreads whole modules over workers (pytest-xdist, --dist loadfile), and a
    minutes-long module handed out last would leave the other workers idle at the end."""
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_modules)


@pytest.fixture(autouse=True)
def _restore_root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def chains(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedChains]:
    started = SharedChains(tmp_path_factory.mktemp("chains"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def shared_chain(request: pytest.FixtureRequest, chains: SharedChains) -> SharedChain:
    """The session chain of the module's kind (module_block_time), as just deployed."""
    return chains.get(module_block_time(request.node))


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A private redis-server for the module (database 0's URL; a module may use 1.. as well).
    One per module, not per session: a worker process a module failed to stop stays connected
    to its own, stopped server, and cannot take the next module's tasks."""
    try:
        with private_redis() as port:
            yield f"redis://127.0.0.1:{port}/0"
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
