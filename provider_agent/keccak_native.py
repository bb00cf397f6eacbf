"""Batched keccak256 in C, built on first use and called through ctypes, for the prover's
commitment (DESIGN.md requirement 10: hashing must stay small next to the matmul).

The reference `protocol.merkle.hash_messages` pays a Python call per chunk and holds the GIL,
so it runs on one core and competes with everything else. Here one C call hashes a whole
batch and ctypes releases the GIL, so batches run on several threads at once and alongside
torch. Building needs a C compiler (`cc`); without one, `native_hasher()` returns None and
the prover uses the reference, which gives the same bytes (tests check both against sha3).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

from protocol.errors import InvalidParameter
from protocol.merkle import MessageHasher

logger = logging.getLogger(__name__)

MAX_MESSAGE = 4096
# Below this many messages a batch is not worth splitting across threads.
_MIN_SPLIT = 2048

def _rho_offsets() -> dict[tuple[int, int], int]:
    """Keccak's rotation offsets, from their definition (FIPS 202, 3.2.2)."""
    offsets = {(0, 0): 0}
    x, y = 1, 0
    for t in range(24):
        offsets[(x, y)] = (t + 1) * (t + 2) // 2 % 64
        x, y = y, (2 * x + 3 * y) % 5
    return offsets


def _round_code() -> str:
    """One Keccak-f[1600] round, unrolled over named lanes a0..a24 (lane x + 5y), generated
    from the step definitions so that no offset or index is typed by hand."""
    rho = _rho_offsets()
    lines = [f"c{x} = a{x} ^ a{x + 5} ^ a{x + 10} ^ a{x + 15} ^ a{x + 20};" for x in range(5)]
    lines += [f"d{x} = c{(x + 4) % 5} ^ ROTL(c{(x + 1) % 5}, 1);" for x in range(5)]
    for x in range(5):
        for y in range(5):
            target = y + 5 * ((2 * x + 3 * y) % 5)
            r = rho[(x, y)]
            value = f"(a{x + 5 * y} ^ d{x})"
            lines.append(f"b{target} = {f'ROTL({value}, {r})' if r else value};")
    for y in range(5):
        for x in range(5):
            lines.append(f"a{x + 5 * y} = b{x + 5 * y} ^ (~b{(x + 1) % 5 + 5 * y} & "
                         f"b{(x + 2) % 5 + 5 * y});")
    lines.append("a0 ^= RC[r];")
    return "\n      ".join(lines)


_SOURCE = r"""
#include <stdint.h>
#include <string.h>

static const uint64_t RC[24] = {
  0x0000000000000001ULL, 0x0000000000008082ULL, 0x800000000000808aULL, 0x8000000080008000ULL,
  0x000000000000808bULL, 0x0000000080000001ULL, 0x8000000080008081ULL, 0x8000000000008009ULL,
  0x000000000000008aULL, 0x0000000000000088ULL, 0x0000000080008009ULL, 0x000000008000000aULL,
  0x000000008000808bULL, 0x800000000000008bULL, 0x8000000000008089ULL, 0x8000000000008003ULL,
  0x8000000000008002ULL, 0x8000000000000080ULL, 0x000000000000800aULL, 0x800000008000000aULL,
  0x8000000080008081ULL, 0x8000000000008080ULL, 0x0000000080000001ULL, 0x8000000080008008ULL};
#define ROTL(x, y) (((x) << (y)) | ((x) >> (64 - (y))))
#define RATE 136
#define MAX_MESSAGE 4096

static void keccakf(uint64_t st[25]) {
  uint64_t LANES;
  uint64_t c0, c1, c2, c3, c4, d0, d1, d2, d3, d4;
  uint64_t BLANES;
  LOAD
  for (int r = 0; r < 24; r++) {
      ROUND
  }
  STORE
}

static uint64_t load64(const uint8_t *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
#else
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
#endif
}

/* out[32*i ..] = keccak256(prefix || data[size*i .. size*(i+1)]) for i < count. */
int keccak256_batch(const uint8_t *data, uint64_t count, uint64_t size, uint8_t prefix,
                    uint8_t *out) {
  uint8_t buf[MAX_MESSAGE + 2 * RATE];
  if (size > MAX_MESSAGE) return -1;
  uint64_t len = size + 1;
  uint64_t padded = (len / RATE + 1) * RATE;
  for (uint64_t m = 0; m < count; m++) {
    uint64_t st[25] = {0};
    buf[0] = prefix;
    memcpy(buf + 1, data + m * size, size);
    memset(buf + len, 0, padded - len);
    buf[len] |= 0x01;
    buf[padded - 1] |= 0x80;
    for (uint64_t off = 0; off < padded; off += RATE) {
      for (int i = 0; i < RATE / 8; i++) st[i] ^= load64(buf + off + 8 * i);
      keccakf(st);
    }
    for (int i = 0; i < 4; i++)
      for (int b = 0; b < 8; b++) out[32 * m + 8 * i + b] = (uint8_t)(st[i] >> (8 * b));
  }
  return 0;
}
""".replace("BLANES", ", ".join(f"b{i}" for i in range(25))).replace(
    "LANES", ", ".join(f"a{i}" for i in range(25))).replace(
    "LOAD", " ".join(f"a{i} = st[{i}];" for i in range(25))).replace(
    "STORE", " ".join(f"st[{i}] = a{i};" for i in range(25))).replace("ROUND", _round_code())


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "unchained"


def _build() -> Path | None:
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        logger.warning("no C compiler: PoG commits with the pure-Python keccak (slower)")
        return None
    digest = hashlib.sha256(_SOURCE.encode()).hexdigest()[:16]
    target = _cache_dir() / f"keccak_batch_{digest}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        source = Path(tmp) / "keccak_batch.c"
        source.write_text(_SOURCE)
        built = Path(tmp) / "keccak_batch.so"
        result = subprocess.run(
            [compiler, "-O3", "-shared", "-fPIC", "-o", str(built), str(source)],
            capture_output=True, text=True, check=False, timeout=120,
        )
        if result.returncode != 0:
            logger.warning("building the native keccak failed: %s", result.stderr.strip())
            return None
        os.replace(built, target)  # atomic: concurrent builders never load a partial file
    return target


@lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | None:
    try:
        path = _build()
        if path is None:
            return None
        lib = ctypes.CDLL(str(path))
    except (OSError, subprocess.SubprocessError) as err:
        logger.warning("native keccak unavailable: %s", err)
        return None
    lib.keccak256_batch.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64,
                                    ctypes.c_uint8, ctypes.c_char_p]
    lib.keccak256_batch.restype = ctypes.c_int
    return lib


class NativeHasher:
    """A `MessageHasher` that splits a batch over `threads` GIL-free C calls."""

    def __init__(self, lib: ctypes.CDLL, threads: int) -> None:
        self._fn = lib.keccak256_batch
        self.threads = max(1, threads)
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="keccak")

    def __call__(self, buffer: bytes | bytearray | memoryview, size: int, prefix: bytes) -> bytes:
        view = memoryview(buffer).cast("B")
        if size <= 0 or size > MAX_MESSAGE or len(view) % size:
            raise InvalidParameter("message size", size, f"must divide {len(view)} bytes, "
                                   f"at most {MAX_MESSAGE}")
        if len(prefix) != 1:
            raise InvalidParameter("prefix", prefix, "must be one byte")
        # Pass the caller's memory itself when ctypes can address it (a writable buffer such
        # as a numpy panel, or a bytes object); only a read-only view of something else is copied.
        if isinstance(buffer, bytes):
            keep: object = buffer
            base = ctypes.cast(ctypes.c_char_p(buffer), ctypes.c_void_p).value or 0
        else:
            if view.readonly:
                view = memoryview(bytearray(view))
            keep = (ctypes.c_char * len(view)).from_buffer(view)
            base = ctypes.addressof(keep)
        count = len(view) // size
        out = ctypes.create_string_buffer(32 * count)
        parts = min(self.threads, max(1, count // _MIN_SPLIT))
        bounds = [count * p // parts for p in range(parts + 1)]

        def run(lo: int, hi: int) -> int:
            dst = ctypes.cast(ctypes.addressof(out) + 32 * lo, ctypes.c_char_p)
            src = ctypes.cast(base + size * lo, ctypes.c_char_p)
            return int(self._fn(src, hi - lo, size, prefix[0], dst))

        if parts == 1:
            codes = [run(0, count)]
        else:
            codes = list(self._pool.map(run, bounds[:-1], bounds[1:]))
        del keep  # the C calls are done; the buffer may go
        if any(codes):
            raise InvalidParameter("message size", size, "refused by the native hasher")
        return out.raw


@lru_cache(maxsize=4)
def native_hasher(threads: int | None = None) -> MessageHasher | None:
    """The native batched hasher, or None when it cannot be built here."""
    lib = _library()
    if lib is None:
        return None
    return NativeHasher(lib, threads or os.cpu_count() or 1)
