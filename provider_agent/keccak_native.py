"""Batched keccak256 in C for the prover's commitment (DESIGN.md requirement 10: hashing must
stay small next to the matmul).

The C is its own distribution, `unchained-keccak` (native/keccak), which the `provider` extra
pulls: a provider's machine without a C compiler fails at install time instead of proving
slowly, and a renter's install compiles nothing. One C call hashes
a whole batch with the GIL released, so parts of a batch hash on several threads at once and
alongside torch; the reference `protocol.merkle.hash_messages` pays a Python call per chunk
and holds the GIL (same bytes, several times slower).

There is no silent fallback: a slower hasher would lengthen the seed-to-root time and so
understate the device's TFLOPS (a GPU classed lower than it is), so `native_hasher()` raises
`NativeKeccakMissing` when the extension is absent, and the prover refuses to run.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from types import ModuleType

from protocol.errors import InvalidParameter
from protocol.merkle import MessageHasher
from provider_agent import ProviderAgentError

MAX_MESSAGE = 4096
# Below this many messages a batch is not worth splitting across threads.
_MIN_SPLIT = 2048


class NativeKeccakMissing(ProviderAgentError):
    """The compiled keccak extension is not importable: PoG would hash slowly, so it refuses."""

    exit_code = 2  # nothing ran: the installation needs fixing (the CLI's boundary exits with it)

    def __init__(self, cause: BaseException) -> None:
        super().__init__(
            "the native keccak (unchained_keccak) is not installed, so Proof of GPU would hash "
            "with the pure-Python reference and understate this machine's speed; install the "
            "provider's extra with a C compiler and the Python headers present (`./scripts/setup.sh` "
            "or `pip install ./native/keccak '.[provider]'`; Debian: apt-get install build-essential "
            f"python3-dev). Cause: {cause}")
        self.cause = cause


def _load() -> ModuleType:
    """The extension module; raises NativeKeccakMissing (import errors are not cached)."""
    try:
        import unchained_keccak
    except ImportError as err:
        raise NativeKeccakMissing(err) from err
    return unchained_keccak


class NativeHasher:
    """A `MessageHasher` that splits a batch over `threads` GIL-free C calls."""

    def __init__(self, module: ModuleType, threads: int) -> None:
        self._hash_into = module.hash_into
        self.threads = max(1, threads)
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="keccak")

    def __call__(self, buffer: bytes | bytearray | memoryview, size: int, prefix: bytes) -> bytes:
        view = memoryview(buffer).cast("B")  # C-contiguous bytes, no copy
        if size <= 0 or size > MAX_MESSAGE or len(view) % size:
            raise InvalidParameter("message size", size, f"must divide {len(view)} bytes, "
                                   f"at most {MAX_MESSAGE}")
        if len(prefix) != 1:
            raise InvalidParameter("prefix", prefix, "must be one byte")
        count = len(view) // size
        out = bytearray(32 * count)
        target = memoryview(out)
        parts = min(self.threads, max(1, count // _MIN_SPLIT))
        bounds = [count * p // parts for p in range(parts + 1)]

        def run(lo: int, hi: int) -> None:
            self._hash_into(view[size * lo:size * hi], size, prefix[0], target[32 * lo:32 * hi])

        if parts == 1:
            run(0, count)
        else:
            list(self._pool.map(run, bounds[:-1], bounds[1:]))
        target.release()
        return bytes(out)


@lru_cache(maxsize=4)
def native_hasher(threads: int | None = None) -> MessageHasher:
    """The native batched hasher over `threads` threads (default: every core).

    Raises NativeKeccakMissing when the extension was not built (never a silent slow path)."""
    return NativeHasher(_load(), threads or os.cpu_count() or 1)


def require_native() -> None:
    """Raises NativeKeccakMissing unless the native hasher is available (checked up front by
    commands that would otherwise fail only after generating the matrices)."""
    _load()
