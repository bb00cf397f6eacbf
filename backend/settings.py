"""Backend settings from the environment (prefix UNCHAINED_BACKEND_), built once per process.

pydantic-settings is not used on purpose (protocol/env.py says why); `from_env` fills the model
from prefixed variables with pydantic's parsing and validation.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from protocol.env import settings_from_env

ENV_PREFIX = "UNCHAINED_BACKEND_"
DEV_SECRET = "development-only-secret"


def _default_data_dir() -> Path:
    return Path(os.environ.get("UNCHAINED_DATA_DIR", Path.home() / ".unchained"))


class Settings(BaseModel):
    """Every knob of the backend. Field `x` is read from UNCHAINED_BACKEND_X."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    environment: str = "development"
    data_dir: Path = Field(default_factory=_default_data_dir)
    database_url: str = ""  # empty: sqlite:///<data_dir>/backend.db
    rpc_url: str = "http://127.0.0.1:8545"
    deployment_file: Path | None = None  # default: deployments/<chainId>.json of the repository
    confirmations: int = Field(default=2, ge=0, le=1000)
    index_batch_blocks: int = Field(default=2000, ge=1, le=100_000)
    index_poll_seconds: float = Field(default=1.0, gt=0)
    run_indexer: bool = True  # `backend serve` follows the chain in a background thread
    broker_url: str = "redis://127.0.0.1:6379/0"
    dispatch: bool = True  # enqueue funded jobs on the provider's Celery queue
    # SIWE: the domain (host[:port]) and URI every signed message must name; default: those of
    # public_url, the address clients reach this backend at (clients check the domain too).
    siwe_domain: str = ""
    siwe_uri: str = ""
    nonce_ttl_s: int = Field(default=300, ge=10)
    session_ttl_s: int = Field(default=3600, ge=60)
    session_secret: str = DEV_SECRET  # key of the session-token hash
    max_model_bytes: int = Field(default=256 * 1024 * 1024, ge=1)
    max_input_bytes: int = Field(default=16 * 1024 * 1024, ge=1)
    max_output_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    public_url: str = "http://127.0.0.1:8000"
    # Models are loaded (upload) and dry-run (POST /models/{hash}/check) in a child process with
    # these limits, at most model_check_concurrency at once.
    model_check_memory_bytes: int = Field(default=4 << 30, ge=256 << 20)
    model_check_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    model_check_concurrency: int = Field(default=2, ge=1, le=64)
    # A provider whose last heartbeat is older than this is not offered to renters (crashed or
    # gone); agents beat every 15 s by default, so four beats may be missed.
    provider_stale_s: float = Field(default=60.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _siwe_defaults_from_public_url(cls, values: Any) -> Any:
        if isinstance(values, dict):
            public = urlsplit(str(values.get("public_url") or cls.model_fields["public_url"].default))
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
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'backend.db'}"

    @property
    def blob_dir(self) -> Path:
        return self.data_dir / "blobs"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
        """Fields from prefixed environment variables, then explicit overrides."""
        return settings_from_env(cls, ENV_PREFIX, os.environ if environ is None else environ, **overrides)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
