"""Backend settings from the environment (prefix UNCHAINED_BACKEND_), built once per process.

pydantic-settings is not used on purpose (client/settings.py says why); `from_env` fills the model
from prefixed variables with pydantic's parsing and validation.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from client.settings import settings_from_env

ENV_PREFIX = "UNCHAINED_BACKEND_"
DEV_SECRET = "development-only-secret"
DEFAULT_PUBLIC_URL = "http://127.0.0.1:8000"


def network_data_dir(chain_id: int) -> Path:
    """The backend's own directory on one network: ~/.unchained/<chainId>/backend (the root
    from UNCHAINED_DATA_DIR), never a directory shared with another network or service."""
    return Path(os.environ.get("UNCHAINED_DATA_DIR", Path.home() / ".unchained")) / str(chain_id) / "backend"


class Settings(BaseModel):
    """Every knob of the backend. Field `x` is read from UNCHAINED_BACKEND_X."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    environment: str = "development"
    # None: network_data_dir(chain id of rpc_url), chosen by `for_network` once the node answers.
    data_dir: Path | None = None
    # Replicas: the S3-compatible bucket they share blobs through (backend.object_store),
    # http(s)://ACCESS_KEY:SECRET_KEY@host[:port]/bucket[/prefix]; empty: data_dir alone.
    blob_store_url: str = ""
    database_url: str = ""  # empty: sqlite:///<data_dir>/backend.db
    rpc_url: str = "http://127.0.0.1:8545"
    deployment_file: Path | None = None  # default: ./deployments/<chainId>.json (client.chain.load_deployment)
    confirmations: int = Field(default=2, ge=0, le=1000)
    index_batch_blocks: int = Field(default=2000, ge=1, le=100_000)
    index_poll_seconds: float = Field(default=1.0, gt=0)
    # At most one indexer pass per this many seconds on average (backend.runtime.PassPacer: a few
    # may follow each other at once after a quieter spell): when blocks come fast (a node that mines
    # each transaction at once, under load) one pass reads the burst together instead of paying
    # its node calls and database transaction per block. Adds at most this much to dispatch.
    index_min_interval_s: float = Field(default=0.1, ge=0, le=10)
    # Where the node pushes new blocks (eth_subscribe newHeads), so funded jobs are dispatched as
    # their blocks arrive instead of at the next poll; empty: rpc_url's own port over ws(s)://,
    # "off": poll only. Without a WebSocket endpoint the indexer polls every index_poll_seconds.
    ws_url: str = ""
    run_indexer: bool = True  # `backend serve` follows the chain in a background thread
    broker_url: str = "redis://127.0.0.1:6379/0"
    dispatch: bool = True  # enqueue funded jobs on the provider's Celery queue
    # The dispatch key: every task sent to a provider is signed with it (client.task_auth), and
    # providers take jobs only from the address the deployment names (`operator.dispatcher`, else
    # the deployer). It signs messages only: it needs no funds. None: nothing is dispatched.
    keystore: Path | None = None
    password_file: Path | None = None  # a file holding the keystore's password
    # SIWE: the domain (host[:port]) and URI every signed message must name; default: those of
    # public_url, the address clients reach this backend at (clients check the domain too).
    siwe_domain: str = ""
    siwe_uri: str = ""
    nonce_ttl_s: int = Field(default=300, ge=10)
    session_ttl_s: int = Field(default=3600, ge=60)
    # How long a process trusts a session it looked up without asking the database again (auth.SessionCache):
    # a logout through another backend process takes effect here within this time. 0: ask every time.
    session_cache_s: float = Field(default=30.0, ge=0, le=300)
    session_secret: str = DEV_SECRET  # key of the session-token hash
    max_model_bytes: int = Field(default=256 * 1024 * 1024, ge=1)
    max_input_bytes: int = Field(default=16 * 1024 * 1024, ge=1)
    max_output_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    max_lease_image_bytes: int = Field(default=2 * 1024 * 1024 * 1024, ge=1)  # a renter's root file system tarball
    # The address clients reach this backend at (SIWE domain, result URLs); empty: derived from
    # the host and port `backend serve` binds (`with_listen_address`), so any port signs in.
    public_url: str = ""
    # Models are loaded (upload) and dry-run (POST /models/{hash}/check) in a child process with
    # these limits, at most model_check_concurrency at once.
    model_check_memory_bytes: int = Field(default=4 << 30, ge=256 << 20)
    model_check_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    model_check_concurrency: int = Field(default=2, ge=1, le=64)
    # A provider whose last heartbeat is older than this is not offered to renters (crashed or
    # gone); agents beat every 15 s by default, so four beats may be missed.
    provider_stale_s: float = Field(default=60.0, gt=0)
    # A staked verifier's access to job inputs and outputs is read from the chain (three calls)
    # and then trusted for this long: an audit fetches ten or more files in a few seconds. A
    # verifier that unbonds keeps reading for at most this long (its stake stays slashable for
    # the far longer unbonding delay); 0 reads the chain every time.
    verifier_check_ttl_s: float = Field(default=10.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _siwe_defaults_from_public_url(cls, values: Any) -> Any:
        if isinstance(values, dict):
            public = urlsplit(str(values.get("public_url") or DEFAULT_PUBLIC_URL))
            if not values.get("siwe_domain"):
                values = {**values, "siwe_domain": public.netloc}
            if not values.get("siwe_uri"):
                values = {**values, "siwe_uri": f"{public.scheme}://{public.netloc}"}
        return values

    @model_validator(mode="after")
    def _refuse_default_secret_outside_development(self) -> Settings:
        if self.environment != "development" and self.session_secret == DEV_SECRET:
            raise ValueError("set UNCHAINED_BACKEND_SESSION_SECRET outside development")
        return self

    @property
    def data_path(self) -> Path:
        if self.data_dir is None:
            raise ValueError("the backend's data directory depends on the network: call for_network(chain_id)")
        return self.data_dir

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_path / 'backend.db'}"

    @property
    def blob_dir(self) -> Path:
        return self.data_path / "blobs"

    @property
    def base_url(self) -> str:
        return (self.public_url or DEFAULT_PUBLIC_URL).rstrip("/")

    def for_network(self, chain_id: int) -> Settings:
        """These settings with the per-network data directory filled in when none was given."""
        return self if self.data_dir is not None else self.model_copy(update={"data_dir": network_data_dir(chain_id)})

    def with_listen_address(self, host: str, port: int) -> Settings:
        """The public URL (and SIWE domain and URI) of a server bound to host:port, unless given."""
        if self.public_url:
            return self
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        values = {**self.model_dump(), "public_url": f"http://{shown}:{port}"}
        if self.siwe_domain == urlsplit(DEFAULT_PUBLIC_URL).netloc:
            values.pop("siwe_domain")
        if self.siwe_uri == DEFAULT_PUBLIC_URL:
            values.pop("siwe_uri")
        return Settings.model_validate(values)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
        """Fields from prefixed environment variables, then explicit overrides."""
        return settings_from_env(cls, ENV_PREFIX, os.environ if environ is None else environ, **overrides)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
