"""Content-addressed files under the data directory: models, job inputs and job outputs.

A file's name is the keccak256 of its bytes, so a stored file can always be re-verified and two
uploads of the same bytes share one file. Uploads stream to a temporary file while they are
hashed and counted (a 256 MiB model never sits in memory); only an accepted upload is renamed
into place, so readers never see half a file and rejected bytes leave nothing behind.

Replicas of the backend share an object store (backend.object_store): then each keeps its
directory as a cache of it. A blob is written to the shared store before the request that brought
it is answered, and a blob missing here is fetched from there, checked against its hash and kept.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from sha3 import keccak_256

from backend.errors import NotFound, StorageUnavailable, TooLarge
from backend.object_store import ObjectStore
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
        if self.store.shared is not None:
            self.store.shared.put(self.digest, target)
        return self.digest

    def discard(self) -> None:
        if not self.kept:
            self.temp.unlink(missing_ok=True)

    def read(self) -> bytes:
        return (self.store._path(self.digest) if self.kept else self.temp).read_bytes()


class BlobStore:
    def __init__(self, root: Path, shared: ObjectStore | None = None) -> None:
        self.root = root
        self.shared = shared  # None: this directory is the only store (one backend process)
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
            if self.shared is not None:
                self.shared.put(digest, path)
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
        if not path.exists() and not self._fetch(digest, path):
            raise NotFound("blob", digest)
        return path

    def _fetch(self, digest: str, path: Path) -> bool:
        """Copies the blob from the shared store into this directory; False: it has none."""
        if self.shared is None:
            return False
        incoming = self.root / "incoming"
        incoming.mkdir(exist_ok=True)
        fd, name = tempfile.mkstemp(dir=incoming)
        os.close(fd)
        temp = Path(name)
        try:
            if not self.shared.get(digest, temp):
                return False
            hasher = keccak_256()
            with temp.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    hasher.update(chunk)
            if "0x" + hasher.hexdigest() != digest:
                raise StorageUnavailable(f"blob store {self.shared.where}: {digest} holds other bytes; not used")
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(temp, path)
            return True
        finally:
            temp.unlink(missing_ok=True)
