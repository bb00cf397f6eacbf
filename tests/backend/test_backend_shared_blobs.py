"""Replicas share blobs through an S3-compatible store (a real s3rver from npm): what one replica
received, another serves; altered bytes in the store are refused; a bad or absent store stops the
start, not the first upload."""

from __future__ import annotations

import io
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import backend_support as support
import pytest
from fastapi.testclient import TestClient
from minio import Minio

from backend.api.app import create_app
from renter.client import BackendClient
from backend.errors import StorageUnavailable
from backend.runtime import Backend
from client.backend_http import ApiError
from client.ports import free_port
from protocol.merkle import keccak256
from tests.support.waiting import wait_until

S3RVER = Path(__file__).resolve().parents[2] / "node_modules" / ".bin" / "s3rver"
BUCKET = "blobs"


def port_open(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=0.5).close()
        return True
    except OSError:
        return False


@pytest.fixture
def store(tmp_path: Path) -> Iterator[str]:
    """A private s3rver with one bucket; its URL as the backend takes it."""
    if not S3RVER.exists():
        pytest.skip("s3rver is not installed (npm install)")
    port = free_port()
    server = subprocess.Popen([str(S3RVER), "-d", str(tmp_path / "s3"), "-a", "127.0.0.1", "-p", str(port), "-s",
                               "--configure-bucket", BUCKET], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "NODE_OPTIONS": ""})
    try:
        wait_until(lambda: port_open("127.0.0.1", port), 30, f"s3rver listens on {port}")
        yield f"http://S3RVER:S3RVER@127.0.0.1:{port}/{BUCKET}"
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture
def replicas(chain, market, tmp_path, pg_url, store) -> Iterator[list[TestClient]]:  # type: ignore[no-untyped-def]
    """Two backends on one database and one store, each with its own data directory."""
    clients = []
    try:
        for name in ("one", "two"):
            settings = support.make_settings(chain, tmp_path / name, database_url=pg_url, blob_store_url=store)
            client = TestClient(create_app(settings))
            clients.append(client.__enter__())
        clients[0].app.state.backend.make_indexer().sync()
        yield clients
    finally:
        for client in clients:
            client.__exit__(None, None, None)


def test_what_one_replica_received_another_serves(replicas) -> None:  # type: ignore[no-untyped-def]
    one, two = replicas
    owner = BackendClient(one, support.anvil_key(3))
    model = support.Tagged.torchscript(3.0)
    pushed = owner.push_model(model, "shared-net", "torchscript", private=True)
    [input_hash] = owner.upload_inputs([b"an input uploaded through replica one"])
    # The same renter, signed in through replica one, reads both through replica two.
    headers = {"Authorization": f"Bearer {owner.token}"}
    served = two.get(f"/models/{pushed['content_hash']}/content", headers=headers)
    assert served.status_code == 200 and served.content == model
    assert two.app.state.backend.blobs.path(input_hash).read_bytes() == b"an input uploaded through replica one"


def test_bytes_altered_in_the_shared_store_are_refused(replicas, store) -> None:  # type: ignore[no-untyped-def]
    one, two = replicas
    owner = BackendClient(one, support.anvil_key(3))
    [digest] = owner.upload_inputs([b"the renter's real input"])
    client = Minio(store.split("@")[1].split("/")[0], access_key="S3RVER", secret_key="S3RVER", secure=False)
    forged = b"bytes an attacker put in the bucket"
    client.put_object(BUCKET, f"{digest[2:4]}/{digest[2:]}", io.BytesIO(forged), len(forged))
    with pytest.raises(StorageUnavailable, match="holds other bytes"):
        two.app.state.backend.blobs.path(digest)
    assert not any((two.app.state.backend.blobs.root / digest[2:4]).glob("*")), "nothing forged was kept"
    assert one.app.state.backend.blobs.path(digest).read_bytes() == b"the renter's real input"  # its own copy


def test_a_missing_or_malformed_store_stops_the_start(chain, tmp_path, store) -> None:  # type: ignore[no-untyped-def]
    for url, why in ((store.rsplit("/", 1)[0] + "/no-such-bucket", "no such bucket"),
                     ("ftp://a:b@127.0.0.1/blobs", "expected http"),
                     ("http://127.0.0.1:9/blobs", "expected http"),
                     (f"http://S3RVER:S3RVER@127.0.0.1:{free_port()}/blobs", "blob store")):
        with pytest.raises(StorageUnavailable, match=why):
            Backend.open(support.make_settings(chain, tmp_path, blob_store_url=url))


def test_a_blob_in_no_store_is_not_found(replicas) -> None:  # type: ignore[no-untyped-def]
    one, _ = replicas
    owner = BackendClient(one, support.anvil_key(3))
    missing = "0x" + keccak256(b"never uploaded").hex()
    with pytest.raises(ApiError) as caught:
        owner.model(missing)
    assert caught.value.status == 404
