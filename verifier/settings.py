"""The verifier's settings: environment variables prefixed UNCHAINED_VERIFIER_."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from client.settings import settings_from_env

ENV_PREFIX = "UNCHAINED_VERIFIER_"


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rpc_url: str = "http://127.0.0.1:8545"
    keystore: Path | None = None
    password_file: Path | None = None  # a file holding the keystore's password (client.keystore), never the password
    deployment_file: Path | None = None  # default: deployments/<chainId>.json
    broker_url: str = "redis://127.0.0.1:6379/0"
    backend_url: str | None = None
    stake_wei: int = Field(default=2 * 10**18, gt=0)  # staked at start when below the minimum
    pog_interval_s: float = Field(default=6 * 3600, gt=0)
    pog_jitter_s: float = Field(default=3600, ge=0)
    pog_concurrency: int = Field(default=2, ge=1)
    pog_retries: int = Field(default=3, ge=0)
    pog_backoff_s: float = Field(default=30, gt=0)
    pog_dtype: str = "int8"
    pog_n: int | None = None  # None: from each GPU's claimed class (tests and CPU demos set it)
    k: int = Field(default=32, ge=32, le=64)
    poll_s: float = Field(default=2.0, gt=0)
    metrics_port: int | None = 9102  # Prometheus /metrics; None: off
    work_dir: Path = Path("verifier-data")  # models and inputs of re-executed samples
    # The log follower's cursor and the ids it follows (verifier.watch); None: kept in memory
    # and read again from the deployment block at start (`verifier run` uses work_dir/state.sqlite).
    state_db: Path | None = None
    reexec_memory_bytes: int = Field(default=4 << 30, gt=0)  # address-space limit of the model's child
    reexec_timeout_s: float = Field(default=120.0, gt=0)
    audit_attempts: int = Field(default=5, ge=1)  # tries before a transiently failing audit is given up
    audit_backoff_s: float = Field(default=5.0, gt=0)
    audit_parallel: int = Field(default=4, ge=1)  # audits at once (their model runs still one at a time)
    # Audit every committed job (True), or those drawn with at least the probability that makes
    # cheating a loss plus whatever capacity is left (verifier.audit_draw).
    audit_all: bool = False
    # An interpreter with nv-local-gpu-verifier installed (its own venv, e.g. .venv-nv/bin/python:
    # its package is named `verifier` too), which checks GPUs' CC attestation evidence; None:
    # this interpreter, where it is normally absent (evidence recorded "not checked").
    nv_python: Path | None = None

    @classmethod
    def from_env(cls, **overrides: Any) -> "Settings":
        return settings_from_env(cls, ENV_PREFIX, os.environ, **overrides)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
