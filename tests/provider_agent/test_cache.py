"""The content cache: fetched over HTTP by hash, verified, bounded in bytes, LRU-evicted."""

from __future__ import annotations

import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from provider_agent.cache import ContentCache, ContentMismatch, ContentMissing, ContentTooLarge, HttpSource, content_hash

BLOBS: dict[str, bytes] = {}
LATE: dict[str, int] = {}  # name -> how many more GETs answer 404 before the blob is served


@pytest.fixture(scope="module")
def backend():
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            name = self.path.removeprefix("/blobs/")
            data = BLOBS.get(name)
            if LATE.get(name, 0) > 0:
                LATE[name] -= 1
                data = None
            if data is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _blob(size: int) -> str:
    data = os.urandom(size)
    name = content_hash(data)
    BLOBS[name] = data
    return name


def test_fetches_over_http_and_evicts_least_recently_used(backend, tmp_path):
    cache = ContentCache(tmp_path, 3000, HttpSource(backend))
    a, b, c = _blob(1000), _blob(1000), _blob(1000)
    for name in (a, b, c):
        assert cache.read(name) == BLOBS[name]
    time.sleep(0.01)
    cache.path(a)  # a is now the most recently used
    d = _blob(1000)
    cache.path(d)
    assert {p.name for p in tmp_path.iterdir()} == {a, c, d}  # b, the least recently used, went
    assert cache.used_bytes() <= 3000


def test_content_that_does_not_match_its_hash_is_refused(backend, tmp_path):
    name = _blob(100)
    BLOBS[name] = b"tampered"
    with pytest.raises(ContentMismatch):
        ContentCache(tmp_path, 10_000, HttpSource(backend)).path(name)
    assert not (tmp_path / name).exists()


def test_missing_and_oversized_content_are_clear_errors(backend, tmp_path):
    cache = ContentCache(tmp_path, 500, HttpSource(backend))
    with pytest.raises(ContentMissing):
        cache.path("0x" + "ab" * 32)
    with pytest.raises(ContentTooLarge):
        cache.path(_blob(1000))


def test_a_store_does_not_read_the_whole_directory_again(backend, tmp_path, monkeypatch):
    cache = ContentCache(tmp_path, 100_000, HttpSource(backend))
    reads = []
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: reads.append(path) or real_scandir(path))
    for _ in range(20):
        cache.path(_blob(100))
    assert len(reads) == 1  # at the first store only: storing costs the same however full the cache is
    assert cache.used_bytes() == 2000


def test_a_restarted_cache_evicts_by_last_use_on_disk(backend, tmp_path):
    first = ContentCache(tmp_path, 3000, HttpSource(backend))
    a, b, c = _blob(1000), _blob(1000), _blob(1000)
    for age, name in enumerate((a, b, c)):
        first.path(name)
        os.utime(tmp_path / name, (1_000_000 + age, 1_000_000 + age))  # a used longest ago
    first.path(b)  # b used now
    restarted = ContentCache(tmp_path, 3000, HttpSource(backend))
    restarted.path(_blob(1000))
    assert not (tmp_path / a).exists() and (tmp_path / b).exists() and (tmp_path / c).exists()


def test_files_another_process_stored_are_counted_at_the_next_reading(backend, tmp_path):
    ours = ContentCache(tmp_path, 3000, HttpSource(backend))
    ours.RESCAN_EVERY = 1  # the directory read again at every store after the first
    ours.path(_blob(1000))
    theirs = ContentCache(tmp_path, 3000, HttpSource(backend))
    theirs.path(_blob(1000))
    theirs.path(_blob(1000))
    ours.path(_blob(1000))  # the directory read again: three files there, one goes for the fourth
    assert ours.used_bytes() <= 3000


def test_seeded_content_is_kept_only_when_it_matches_its_name(backend, tmp_path):
    cache = ContentCache(tmp_path, 1500, HttpSource(backend))
    good, wrong, large = os.urandom(100), "0x" + "cd" * 32, os.urandom(2000)
    right_name = _blob(50)  # the source has the right bytes for the name the dispatch got wrong
    refused = cache.seed({content_hash(good): good, wrong: b"claims to be cd..cd", right_name: b"not these",
                          content_hash(large): large, "../escape": b"x"})
    assert sorted(refused) == sorted([wrong, right_name, content_hash(large), "../escape"])
    assert {p.name for p in tmp_path.iterdir() if not p.name.startswith(".")} == {content_hash(good)}
    assert cache.read(content_hash(good)) == good  # served from the cache: the source never had it
    assert cache.read(right_name) == BLOBS[right_name]  # fetched, not the dispatch's bytes


def test_content_a_replica_does_not_hold_yet_is_asked_for_again_not_failed(backend, tmp_path):
    name = _blob(100)
    LATE[name] = 2  # two 404s, then the blob (another replica's upload reached the shared store)
    cache = ContentCache(tmp_path, 10_000, HttpSource(backend, missing_backoff_s=0.01))
    assert cache.read(name) == BLOBS[name]
    assert LATE[name] == 0


def test_content_missing_after_every_retry_is_missing(backend, tmp_path):
    name = _blob(100)
    LATE[name] = 10
    with pytest.raises(ContentMissing):
        ContentCache(tmp_path, 10_000, HttpSource(backend, missing_retries=3, missing_backoff_s=0.01)).read(name)
    assert LATE[name] == 6  # asked four times
