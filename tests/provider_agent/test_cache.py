"""The content cache: fetched over HTTP by hash, verified, bounded in bytes, LRU-evicted."""

from __future__ import annotations

import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from provider_agent.cache import ContentCache, ContentMismatch, ContentMissing, ContentTooLarge, HttpSource, content_hash

BLOBS: dict[str, bytes] = {}


@pytest.fixture(scope="module")
def backend():
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            name = self.path.removeprefix("/blobs/")
            data = BLOBS.get(name)
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
