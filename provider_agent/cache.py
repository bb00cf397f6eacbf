"""Content by hash: sources (the backend over HTTP, or a local directory) and a bounded cache.

Everything a job needs (its spec, model and inputs) is named by keccak256 of its bytes, so
whatever the source, the bytes are checked against the name before use and nothing from a
source is trusted. The cache keeps files named by hash under a byte budget and evicts the least
recently used ones first (use is recorded in the file's mtime, so it survives restarts).
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import NewType, Protocol

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from client.backend_http import ApiError, BackendUnavailable
from protocol.merkle import keccak256
from provider_agent import ProviderAgentError

logger = logging.getLogger(__name__)

ContentHash = NewType("ContentHash", str)  # 0x + 64 lower-case hex
_HASH = re.compile(r"^0x[0-9a-f]{64}$")


class ContentError(ProviderAgentError):
    """Content could not be had or is not what its hash says."""


class ContentMissing(ContentError):
    def __init__(self, content_hash: str, where: str) -> None:
        super().__init__(f"content {content_hash} not found at {where}")
        self.content_hash = content_hash


class ContentUnavailable(ContentError):
    """The source cannot answer now (unreachable, failing, or we cannot sign in): transient, so
    the job is retried later rather than failed."""


class ContentMismatch(ContentError):
    def __init__(self, content_hash: str, actual: str) -> None:
        super().__init__(f"content named {content_hash} hashes to {actual}")
        self.content_hash = content_hash


class ContentTooLarge(ContentError):
    def __init__(self, content_hash: str, size: int, limit: int) -> None:
        super().__init__(f"content {content_hash} is {size} bytes; the cache holds at most {limit}")
        self.content_hash = content_hash


def content_hash(data: bytes) -> ContentHash:
    return ContentHash("0x" + keccak256(data).hex())


def _check_name(name: str) -> ContentHash:
    if not _HASH.match(name):
        raise ContentError(f"not a content hash: {name!r}")
    return ContentHash(name)


class ContentSource(Protocol):
    def fetch(self, name: ContentHash, limit: int) -> bytes: ...


class DirectorySource:
    """Files named by their content hash in one directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, data: bytes) -> ContentHash:
        """Stores `data` under its content hash (how such a directory is filled); returns the name."""
        name = content_hash(data)
        (self.root / name).write_bytes(data)
        return name

    def fetch(self, name: ContentHash, limit: int) -> bytes:
        path = self.root / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise ContentMissing(name, str(self.root)) from None
        if size > limit:
            raise ContentTooLarge(name, size, limit)
        return path.read_bytes()


class HttpSource:
    """The backend's content route (`GET {base}{path}` with {hash} filled in), streamed with a
    size limit so a hostile server cannot fill the disk. `auth` (the agent's signed-in session)
    is needed for a job's inputs and private model, which the backend serves only to the job's
    provider; specs and public models are open.

    A 404 is asked again `missing_retries` times, `missing_backoff_s` apart and doubling: content a
    funded spec names was uploaded by its renter, and a backend replica may not hold it yet (a
    shared store's write in flight, a replica without one); failing the job at once would refund
    a renter whose job could have run."""

    def __init__(self, base_url: str, path_template: str = "/blobs/{hash}", timeout: float = 60.0,
                 auth: httpx.Auth | None = None, missing_retries: int = 3, missing_backoff_s: float = 0.5) -> None:
        self.base_url = base_url.rstrip("/")
        self.path_template = path_template
        self.missing_retries = missing_retries
        self.missing_backoff_s = missing_backoff_s
        # One client for every fetch (it is thread-safe): a new one per fetch built a TLS context
        # each time, which cost more CPU than the download itself.
        self.http = httpx.Client(timeout=timeout, follow_redirects=True, auth=auth)

    def fetch(self, name: ContentHash, limit: int) -> bytes:
        retrying = Retrying(retry=retry_if_exception_type(ContentMissing), reraise=True,
                            stop=stop_after_attempt(self.missing_retries + 1),
                            wait=wait_exponential(multiplier=self.missing_backoff_s),
                            before_sleep=lambda state: logger.info(
                                "content %s: not found at the backend, asking again in %.1f s", name,
                                state.upcoming_sleep))
        return retrying(self._fetch_once, name, limit)

    def _fetch_once(self, name: ContentHash, limit: int) -> bytes:
        url = self.base_url + self.path_template.format(hash=name)
        chunks, size = [], 0
        try:
            with self.http.stream("GET", url) as response:
                if response.status_code == 404:
                    raise ContentMissing(name, url)
                if response.status_code >= 500 or response.status_code == 429:
                    raise ContentUnavailable(f"fetching {name} from {url}: HTTP {response.status_code}")
                response.raise_for_status()
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise ContentTooLarge(name, size, limit)
                    chunks.append(chunk)
        except httpx.TransportError as exc:
            raise ContentUnavailable(f"fetching {name} from {url}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise ContentError(f"fetching {name} from {url}: {exc}") from exc
        except BackendUnavailable as exc:  # signing in failed for now
            raise ContentUnavailable(f"fetching {name} from {url}: {exc}") from exc
        except ApiError as exc:
            raise ContentError(f"fetching {name} from {url}: {exc}") from exc
        return b"".join(chunks)


class ContentCache:
    """Hash-verified files under `root`, at most `max_bytes` in total, LRU-evicted.

    The files and their order of use are also kept in memory, so that storing one costs the same
    however many the cache holds (reading the directory at every store made each job's fetches
    grow with the cache). The directory stays the truth: it is read at the first store and again
    every RESCAN_EVERY stores, which counts what another process sharing it stored or removed."""

    RESCAN_EVERY = 256

    def __init__(self, root: Path, max_bytes: int, source: ContentSource) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.source = source
        self._lock = threading.Lock()
        self._sizes: OrderedDict[str, int] | None = None  # name -> bytes, least recently used first
        self._used = 0
        self._stores = 0  # since the directory was last read
        root.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        """The local file holding `name`, fetched and verified first if it is not cached."""
        name = _check_name(name)
        path = self.root / name
        if path.exists():
            os.utime(path)  # most recently used, also for the next process that reads the directory
            with self._lock:
                if self._sizes is not None and name in self._sizes:
                    self._sizes.move_to_end(name)
            return path
        data = self.source.fetch(name, self.max_bytes)
        actual = content_hash(data)
        if actual != name:
            raise ContentMismatch(name, actual)
        self._store(name, data)
        return path

    def seed(self, items: Mapping[str, bytes]) -> list[str]:
        """Stores content handed over with a job (its dispatch) instead of fetched: each item
        only if its bytes hash to its name and it fits; the rest is left to be fetched, so bad
        content costs a fetch, never a wrong input. Returns the names refused."""
        refused = []
        for name, data in items.items():
            if not _HASH.match(name) or content_hash(data) != name or len(data) > self.max_bytes:
                refused.append(name)
            elif not (self.root / name).exists():
                self._store(ContentHash(name), data)
        return refused

    def _store(self, name: ContentHash, data: bytes) -> None:
        path = self.root / name
        with self._lock:
            self._make_room(len(data))
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".fetch-")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)  # atomic: a reader never sees a partial file
            assert self._sizes is not None  # read by _make_room
            self._sizes[name] = len(data)
            self._used += len(data)
        logger.debug("cached %s (%d bytes)", name, len(data))

    def read(self, name: str) -> bytes:
        return self.path(name).read_bytes()

    def used_bytes(self) -> int:
        return sum(p.stat().st_size for p in self._entries())

    def _entries(self) -> list[Path]:
        return [p for p in self.root.iterdir() if _HASH.match(p.name)]

    def _read_directory(self) -> None:
        """The cached files from the directory, in order of last use (their mtimes)."""
        found = []
        for entry in os.scandir(self.root):
            if _HASH.match(entry.name):
                try:
                    stat = entry.stat()
                except FileNotFoundError:  # removed meanwhile by another process
                    continue
                found.append((stat.st_mtime, entry.name, stat.st_size))
        found.sort()
        self._sizes = OrderedDict((name, size) for _, name, size in found)
        self._used = sum(self._sizes.values())
        self._stores = 0

    def _make_room(self, incoming: int) -> None:
        if self._sizes is None or self._stores >= self.RESCAN_EVERY:
            self._read_directory()
        assert self._sizes is not None
        self._stores += 1
        while self._sizes and self._used + incoming > self.max_bytes:
            victim, size = self._sizes.popitem(last=False)
            self._used -= size
            (self.root / victim).unlink(missing_ok=True)
            logger.info("evicted %s from the cache", victim)
