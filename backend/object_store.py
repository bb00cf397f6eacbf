"""The blob store replicas share: an S3-compatible bucket (AWS S3, MinIO, Ceph, R2, ...).

Each replica keeps its blobs in its own data directory, which then serves as a cache of this
store: a blob is written here before the upload that brought it is answered, and a replica that
lacks a blob fetches it from here (backend.storage). Blobs are named by their keccak256, so a
fetched blob is checked against its name and nothing in the bucket is trusted.

The store is named by one URL, `http(s)://ACCESS_KEY:SECRET_KEY@host[:port]/bucket[/prefix]`
(UNCHAINED_BACKEND_BLOB_STORE_URL); the client is MinIO's (minio-py), which speaks to any S3 API.
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import unquote, urlsplit

from minio import Minio
from minio.error import S3Error
from urllib3.exceptions import HTTPError

from backend.errors import StorageUnavailable

log = logging.getLogger(__name__)

MISSING_CODES = {"NoSuchKey", "NoSuchObject"}


class ObjectStore:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or not parts.username or not parts.password:
            raise StorageUnavailable("blob store URL: expected http(s)://ACCESS_KEY:SECRET_KEY@host[:port]/bucket")
        bucket, _, prefix = parts.path.strip("/").partition("/")
        if not bucket:
            raise StorageUnavailable("blob store URL: no bucket named in its path")
        self.bucket = bucket
        self.prefix = prefix.rstrip("/") + "/" if prefix else ""
        self.where = f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}/{bucket}"
        self.client = Minio(parts.netloc.rpartition("@")[2], access_key=unquote(parts.username),
                            secret_key=unquote(parts.password), secure=parts.scheme == "https")

    def _key(self, digest: str) -> str:
        return f"{self.prefix}{digest[2:4]}/{digest[2:]}"

    def check(self) -> None:
        """Refuses a store that cannot be reached or has no such bucket (at start, not at the
        first upload)."""
        try:
            if not self.client.bucket_exists(self.bucket):
                raise StorageUnavailable(f"blob store {self.where}: no such bucket")
        except (S3Error, HTTPError, OSError) as exc:
            raise StorageUnavailable(f"blob store {self.where}: {exc}") from exc

    def put(self, digest: str, path: Path) -> None:
        try:
            self.client.fput_object(self.bucket, self._key(digest), str(path))
        except (S3Error, HTTPError, OSError) as exc:
            raise StorageUnavailable(f"blob store {self.where}: storing {digest}: {exc}") from exc

    def get(self, digest: str, path: Path) -> bool:
        """Downloads the blob to `path`; False when the store has no such blob."""
        try:
            self.client.fget_object(self.bucket, self._key(digest), str(path))
            return True
        except S3Error as exc:
            if exc.code in MISSING_CODES:
                return False
            raise StorageUnavailable(f"blob store {self.where}: reading {digest}: {exc}") from exc
        except (HTTPError, OSError) as exc:
            raise StorageUnavailable(f"blob store {self.where}: reading {digest}: {exc}") from exc


__all__ = ["ObjectStore"]
