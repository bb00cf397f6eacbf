"""Content-addressed files under the data directory: models, job inputs and job outputs.

A file's name is the keccak256 of its bytes, so a stored file can always be re-verified and two
uploads of the same bytes share one file. Uploads stream to a temporary file while they are
hashed and counted (a 256 MiB model never sits in memory); only an accepted upload is renamed
into place, so readers never see half a file and rejected bytes leave nothing behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from sha3 import keccak_256

from backend.errors import NotFound, TooLarge
from protocol.merkle import keccak256


def content_hash(data: bytes) -> str:
    return "0x" + keccak256(data).hex()


@dataclass
class Upload:
    """Received bytes in a temporary file: `keep()` files them under their hash, `discard()`
    (a no-op after keep) removes them."""

    store: BlobStore
    temp: Path
    digest: str
    size: int
    kept: bool = False

    def keep(self) -> str:
        target = self.store._path(self.digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.temp, target)
        self.kept = True
        return self.digest

    def discard(self) -> None:
        if not self.kept:
            self.temp.unlink(missing_ok=True)

    def read(self) -> bytes:
        return (self.store._path(self.digest) if self.kept else self.temp).read_bytes()


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, digest: str) -> Path:
        return self.root / digest[2:4] / digest[2:]

    def put(self, data: bytes) -> str:
        digest = content_hash(data)
        path = self._path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        return digest

    async def receive(self, chunks: AsyncIterator[bytes], limit: int, what: str) -> Upload:
        """Streams chunks to a temporary file, hashing and counting; refuses past `limit`."""
        incoming = self.root / "incoming"
        incoming.mkdir(exist_ok=True)
        fd, name = tempfile.mkstemp(dir=incoming)
        hasher, size = keccak_256(), 0
        try:
            with os.fdopen(fd, "wb") as handle:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > limit:
                        raise TooLarge(what, size, limit)
                    hasher.update(chunk)
                    handle.write(chunk)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
        return Upload(self, Path(name), "0x" + hasher.hexdigest(), size)

    def path(self, digest: str) -> Path:
        path = self._path(digest)
        if not path.exists():
            raise NotFound("blob", digest)
        return path
