"""The provider agent's settings: environment variables prefixed UNCHAINED_PROVIDER_.

pydantic-settings is not used (client/settings.py says why): `Settings` is a pydantic model filled
from UNCHAINED_PROVIDER_<FIELD> variables (case-insensitive) by `from_env`.

The keystore's password is never a setting: it is read from `password_file` (the CLI's
--password-file), else from the file UNCHAINED_PASSWORD_FILE names, else prompted for
(client.keystore); the key itself never leaves the keystore file and this process.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from client.settings import settings_from_env

GIB = 1 << 30
ENV_PREFIX = "UNCHAINED_PROVIDER_"


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rpc_url: str = "http://127.0.0.1:8545"
    keystore: Path | None = None
    password_file: Path | None = None  # a file holding the keystore's password, never the password
    deployments_dir: Path = Path("deployments")  # client.chain.DEPLOYMENTS_DIR (not imported: web3 is slow to load)
    deployment_file: Path | None = None  # default: deployments_dir/<chainId>.json (client.chain)
    broker_url: str = "redis://127.0.0.1:6379/0"
    # Seconds before Redis hands an unacknowledged job to another worker; longer than any job
    # runs, or a healthy slow job is delivered twice (the task would then see it running).
    visibility_timeout_s: int = 3600
    backend_url: str | None = None
    # Where content (models, inputs, specs) comes from by hash: the backend's blob route, or a
    # local directory of files named by their content hash (tests, air-gapped boxes).
    content_path: str = "/blobs/{hash}"
    content_dir: Path | None = None
    # Backend session (Sign-In with Ethereum with the keystore account) and output uploads: an
    # upload that fails is left pending and retried by a task of its own, first upload_backoff_s
    # later, the countdown doubling up to upload_retry_s.
    session_lifetime_s: int = 3600
    upload_backoff_s: float = 0.5
    upload_retry_s: float = 300.0
    data_dir: Path = Path.home() / ".unchained" / "provider"
    cache_bytes: int = 10 * GIB

    # Isolation limits of one job's child process. Its thread count is not a setting: it is part
    # of the execution mode every party computes in (one thread, docs/PROTOCOL.md "Job
    # re-execution"), since a long reduction's float result depends on it.
    job_memory_bytes: int = 8 * GIB
    job_timeout_s: float = 600.0

    # Leases: the renter's machine (provider_agent/lease_env.py). The host renters connect to (this
    # box's public name or address; default: its host name), the address each lease's sshd listens
    # on, and the home disk of a lease using every GPU (a lease gets its share of it).
    lease_public_host: str | None = None
    lease_listen_host: str = "0.0.0.0"
    lease_disk_bytes: int = 8 * GIB
    # The largest renter's image (a root file system tarball) fetched for a lease, which is also
    # what the images' cache (lease_images_dir) keeps at most.
    lease_image_bytes: int = 2 * GIB
    # How often the agent compares its leases' ends with the chain's clock and ends those due
    # on-chain (provider_agent.leases.LeaseWatcher): the miner resumes within about this long.
    lease_check_s: float = 2.0

    # Registration (used when the account is not registered yet).
    stake_wei: int = 10**18
    gpu_model: str = "CPU"
    price_per_gpu_hour_wei: int = 10**16
    price_per_job_unit_wei: int = 10**12
    metadata_uri: str = ""
    # Identity of the CPU "device" when there is no GPU (default: the machine id). A local market
    # running several providers on one machine gives each its own: the registry refuses a device
    # already held by another account.
    cpu_device_id: str | None = None

    # Mining and telemetry.
    mining: bool = True
    mining_difficulty_bits: int = 16
    mining_batch: int = 1 << 14
    mining_policy: str = "yield"  # "yield" or "co-run"
    mining_co_run_duty: float = 0.25
    mining_resume_after_s: float = 1.0  # cooldown after the last job before mining resumes
    # What the reference miner's work would earn (wei per 10^12 hashes): converts hash rate into
    # the yield floor under the price per GPU-hour.
    mining_wei_per_terahash: int = 10**13
    # Open challenges, refunds and payments due are checked this often: well inside the
    # contracts' response window (30 min by default), or an honest provider is slashed for silence.
    heartbeat_s: float = 15.0
    # The committer (provider_agent.committer) commits as soon as a result is signed; it also looks
    # for finalizations due and retries after an unreachable node this often.
    commit_interval_s: float = 5.0
    # Chain seconds the agent allows from sending a commit to its block (a few blocks, a slow
    # node). A result is signed only when now + commit_latency_s + commit_interval_s is before the
    # job's deadline, and promises its commit by then (JobResult.commitBy): a renter cannot fund a
    # job due too soon to commit and slash the provider for the commit that could not land.
    commit_latency_s: float = 20.0
    yield_publish_s: float = 3600.0  # the mining yield floor goes on-chain this often (a transaction)
    metrics_port: int | None = Field(default=None, description="serve /metrics on this port")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: object) -> "Settings":
        """Fields from UNCHAINED_PROVIDER_<NAME> variables; `overrides` (CLI options) win."""
        env = {k.upper(): v for k, v in (os.environ if environ is None else environ).items()}
        return settings_from_env(cls, ENV_PREFIX, env, **{k: v for k, v in overrides.items() if v is not None})

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"

    @property
    def outputs_dir(self) -> Path:
        return self.data_dir / "outputs"

    @property
    def leases_dir(self) -> Path:
        return self.data_dir / "leases"

    @property
    def lease_images_dir(self) -> Path:
        return self.data_dir / "lease-images"

    @property
    def state_db(self) -> Path:
        return self.data_dir / "state.sqlite"

    @property
    def task_nonces_db(self) -> Path:
        """Nonces of the broker tasks that ran here (replay protection), and the jobs and leases
        the dispatcher sent (which the worker may re-send itself), kept across restarts."""
        return self.data_dir / "task_nonces.sqlite"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
