"""Database models. Two kinds of table:

- chain tables (ChainEvent and the projections below it) hold only what contract events say,
  so dropping them and re-indexing rebuilds the same rows (CHAIN_TABLES);
- off-chain tables hold what parties upload or the backend decides (model hub, job specs,
  outputs, provider profiles, SIWE nonces and sessions, dispatches, verifiers' dispute reports).

Amounts are uint256 on-chain: they are stored as decimal strings (Wei type) because SQLite has
no exact 256-bit integer and PostgreSQL NUMERIC would read back as Decimal. Addresses and hashes
are lower-case 0x-hex.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, Float, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator


class Wei(TypeDecorator[int]):
    """A non-negative uint256 as a decimal string in the database, an int in Python."""

    impl = String(78)
    cache_ok = True

    def process_bind_param(self, value: int | None, dialect: Any) -> str | None:
        return None if value is None else str(int(value))

    def process_result_value(self, value: str | None, dialect: Any) -> int | None:
        return None if value is None else int(value)


Address = String(42)
Hex32 = String(66)


class Base(DeclarativeBase):
    pass


def _one_row(primaryjoin: str) -> Any:
    """A read-only link to the one row of another table that shares a key. No foreign key in the
    schema: chain tables are dropped and rebuilt by a re-index while the off-chain rows they
    point at are kept, so either side may lack the other for a while."""
    return relationship(primaryjoin=primaryjoin, viewonly=True, uselist=False)


# ---- chain tables ---------------------------------------------------------------------------


class IndexerCursor(Base):
    """The last block whose events are all applied, per chain (one row), and its hash: if the
    chain's block at that height changes, a reorganisation went deeper than the confirmations."""

    __tablename__ = "indexer_cursor"
    chain_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    last_block: Mapped[int] = mapped_column(BigInteger)
    block_hash: Mapped[str | None] = mapped_column(Hex32, nullable=True)


class ChainEvent(Base):
    """Every decoded event of the deployment; (tx_hash, log_index) makes indexing idempotent."""

    __tablename__ = "chain_events"
    __table_args__ = (UniqueConstraint("tx_hash", "log_index", name="uq_chain_events_tx_log"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    block_number: Mapped[int] = mapped_column(BigInteger, index=True)
    tx_hash: Mapped[str] = mapped_column(Hex32)
    log_index: Mapped[int] = mapped_column(Integer)
    contract: Mapped[str] = mapped_column(String(64))
    event: Mapped[str] = mapped_column(String(64), index=True)
    args: Mapped[dict[str, Any]] = mapped_column(JSON)


class Provider(Base):
    __tablename__ = "providers"
    address: Mapped[str] = mapped_column(Address, primary_key=True)
    gpu_model: Mapped[str] = mapped_column(String(32))
    gpu_count: Mapped[int] = mapped_column(Integer)
    price_per_gpu_hour: Mapped[int] = mapped_column(Wei)
    price_per_job_unit: Mapped[int] = mapped_column(Wei)
    metadata_uri: Mapped[str] = mapped_column(Text, default="")
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    registered_block: Mapped[int] = mapped_column(BigInteger)
    pog_round_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    gpu_class: Mapped[str | None] = mapped_column(String(32), nullable=True)  # verified by PoG
    tflops_milli: Mapped[int | None] = mapped_column(Wei, nullable=True)
    pog_passed: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    pog_block: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # of its last PoG record
    challenges_won: Mapped[int] = mapped_column(Integer, default=0)  # answered / settled
    challenges_lost: Mapped[int] = mapped_column(Integer, default=0)  # slashed as offender
    jobs_finalized: Mapped[int] = mapped_column(Integer, default=0)
    # Loaded with the provider where a list shows them (selectinload), not one query per row.
    stake: Mapped[Stake | None] = _one_row("Provider.address == foreign(Stake.account)")
    profile: Mapped[ProviderProfile | None] = _one_row("Provider.address == foreign(ProviderProfile.address)")


class Stake(Base):
    __tablename__ = "stakes"
    account: Mapped[str] = mapped_column(Address, primary_key=True)
    bonded: Mapped[int] = mapped_column(Wei, default=0)
    unbonding: Mapped[int] = mapped_column(Wei, default=0)
    slashed: Mapped[int] = mapped_column(Wei, default=0)
    slashed_block: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # of its latest slash


class PogRound(Base):
    __tablename__ = "pog_rounds"
    round_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    provider: Mapped[str] = mapped_column(Address, index=True)
    verifier: Mapped[str] = mapped_column(Address)
    n: Mapped[int] = mapped_column(Integer)
    gpu_count: Mapped[int] = mapped_column(Integer)
    commit_deadline: Mapped[int] = mapped_column(BigInteger)
    requested_block: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(16))  # requested|committed|attested|failed
    seed: Mapped[str | None] = mapped_column(Hex32, nullable=True)
    roots: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    measured_millis: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    gpu_class: Mapped[str | None] = mapped_column(String(32), nullable=True)
    tflops_milli: Mapped[int | None] = mapped_column(Wei, nullable=True)
    passed: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # What the round's verifier recorded of each device (off-chain, kept by a rebuild).
    devices: Mapped[list[PogDevice]] = relationship(
        primaryjoin="PogRound.round_id == foreign(PogDevice.round_id)", viewonly=True,
        order_by="PogDevice.gpu_index")


class Job(Base):
    __tablename__ = "jobs"
    job_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    renter: Mapped[str] = mapped_column(Address, index=True)
    provider: Mapped[str] = mapped_column(Address, index=True)
    token: Mapped[str] = mapped_column(Address)
    price: Mapped[int] = mapped_column(Wei)
    spec_hash: Mapped[str] = mapped_column(Hex32, index=True)
    deadline: Mapped[int] = mapped_column(BigInteger)
    # funded|cancel requested|accepted|committed|finalized|refunded
    status: Mapped[str] = mapped_column(String(16))
    frozen: Mapped[bool] = mapped_column(Boolean, default=False)
    funded_tx: Mapped[str] = mapped_column(Hex32)
    funded_block: Mapped[int] = mapped_column(BigInteger)
    output_root: Mapped[str | None] = mapped_column(Hex32, nullable=True)
    item_count: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    result_digest: Mapped[str | None] = mapped_column(Hex32, nullable=True)
    challenge_window_end: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cancellable_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # JobCancelRequested's
    provider_amount: Mapped[int | None] = mapped_column(Wei, nullable=True)
    fee: Mapped[int | None] = mapped_column(Wei, nullable=True)
    refund: Mapped[int | None] = mapped_column(Wei, nullable=True)
    # The provider's reason when it failed the job on-chain (JobFailed); the refund is `refund`.
    failure_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The result as the provider signed it (protocol.job_result), held before the commit is mined:
    # the renter has it from `result_available_at`. The signature is the renter's evidence: a
    # commit that differs (`commit_matches_signed` false) or none by the deadline is slashable.
    signed_output_root: Mapped[str | None] = mapped_column(Hex32, nullable=True)
    signed_item_count: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    signed_result_digest: Mapped[str | None] = mapped_column(Hex32, nullable=True)
    result_signature: Mapped[str | None] = mapped_column(String(132), nullable=True)
    # The chain time by which the provider promised its commit (JobResult.commitBy): a missing
    # commit is slashable only when it is before the deadline (the result is "binding").
    signed_commit_by: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    result_slashed: Mapped[bool | None] = mapped_column(Boolean, nullable=True)  # SignedResultSlashed seen
    result_available_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    commit_matches_signed: Mapped[bool | None] = mapped_column(Boolean, nullable=True)  # None: not both known
    # Off-chain rows about the job, loaded with it where a list shows them (selectinload).
    spec_record: Mapped[JobSpecRecord | None] = _one_row("foreign(Job.spec_hash) == JobSpecRecord.spec_hash")
    dispatch: Mapped[Dispatch | None] = _one_row("Job.job_id == foreign(Dispatch.job_id)")
    failure_report: Mapped[JobFailure | None] = _one_row("Job.job_id == foreign(JobFailure.job_id)")

    def signed_result_binding(self) -> bool | None:
        """Whether the signed result promised a commit before the deadline (None: none signed)."""
        if self.result_signature is None or self.signed_commit_by is None:
            return None
        return self.signed_commit_by < self.deadline

    def commit_is_signed_result(self) -> bool:
        """Whether the committed result is the one the provider signed (both are known)."""
        return (self.output_root, self.item_count, self.result_digest) == (
            self.signed_output_root, self.signed_item_count, self.signed_result_digest)


class Lease(Base):
    __tablename__ = "leases"
    lease_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    renter: Mapped[str] = mapped_column(Address, index=True)
    provider: Mapped[str] = mapped_column(Address, index=True)
    gpu_count: Mapped[int] = mapped_column(Integer)
    ends_at: Mapped[int] = mapped_column(BigInteger)
    paid: Mapped[int] = mapped_column(Wei)
    status: Mapped[str] = mapped_column(String(16))  # active|ended
    ended_by: Mapped[str | None] = mapped_column(Address, nullable=True)
    provider_earned: Mapped[int | None] = mapped_column(Wei, nullable=True)
    renter_refund: Mapped[int | None] = mapped_column(Wei, nullable=True)
    # Off-chain hand-over, relayed as signed (protocol/lease_access.py): the renter's SSH key
    # (EIP-712 LeaseKey by the renter) and the machine's connection details (LeaseAccess by the
    # provider, its hash bound on-chain by offerAccess).
    ssh_public_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    key_signature: Mapped[str | None] = mapped_column(String(132), nullable=True)
    image: Mapped[str | None] = mapped_column(Hex32, nullable=True)  # LeaseKey.image, signed with the key
    access: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # LeaseAccess.message()
    access_signature: Mapped[str | None] = mapped_column(String(132), nullable=True)


class Challenge(Base):
    __tablename__ = "challenges"
    challenge_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    kind: Mapped[str] = mapped_column(String(8))  # pog|job
    subject: Mapped[int] = mapped_column(BigInteger)  # round id or job id
    gpu_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    challenger: Mapped[str] = mapped_column(Address)
    provider: Mapped[str] = mapped_column(Address, index=True)
    k: Mapped[int] = mapped_column(Integer)
    bond: Mapped[int] = mapped_column(Wei)
    response_deadline: Mapped[int] = mapped_column(BigInteger)
    randomness: Mapped[str | None] = mapped_column(Hex32, nullable=True)
    status: Mapped[str] = mapped_column(String(24))
    dispute_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class Dispute(Base):
    __tablename__ = "disputes"
    dispute_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    ref: Mapped[int] = mapped_column(BigInteger)  # the challenge id
    opener: Mapped[str] = mapped_column(Address)
    challenger: Mapped[str] = mapped_column(Address)
    provider: Mapped[str] = mapped_column(Address, index=True)
    vote_end: Mapped[int] = mapped_column(BigInteger)
    votes: Mapped[int] = mapped_column(Integer, default=0)
    verdict: Mapped[str | None] = mapped_column(String(24), nullable=True)
    weight_provider_at_fault: Mapped[int] = mapped_column(Wei, default=0)
    weight_challenger_wrong: Mapped[int] = mapped_column(Wei, default=0)


class Payment(Base):
    """Money movements: credits, withdrawals, payouts, refunds and slashes, one per event."""

    __tablename__ = "payments"
    tx_hash: Mapped[str] = mapped_column(Hex32, primary_key=True)
    log_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    block_number: Mapped[int] = mapped_column(BigInteger)
    contract: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(24))
    account: Mapped[str] = mapped_column(Address, index=True)
    token: Mapped[str] = mapped_column(Address)
    amount: Mapped[int] = mapped_column(Wei)
    ref: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # job/lease/challenge id


# ---- off-chain tables -----------------------------------------------------------------------


class Model(Base):
    """The model hub: content-addressed files (keccak256 of the bytes), public or private."""

    __tablename__ = "models"
    # One entry per (bytes, owner): an owner's private upload never reveals that someone else
    # holds the same file, and each owner decides its own entry's visibility.
    content_hash: Mapped[str] = mapped_column(Hex32, primary_key=True)
    owner: Mapped[str] = mapped_column(Address, primary_key=True, index=True)
    name: Mapped[str] = mapped_column(String(128))
    format: Mapped[str] = mapped_column(String(16))
    size: Mapped[int] = mapped_column(BigInteger)
    private: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Blob(Base):
    """Job inputs, content-addressed; who uploaded them first."""

    __tablename__ = "blobs"
    content_hash: Mapped[str] = mapped_column(Hex32, primary_key=True)
    owner: Mapped[str] = mapped_column(Address)
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class BlobHolder(Base):
    """Every account that uploaded an input's bytes: identical content from two renters is one
    blob, and each of them may read it and name it in its jobs."""

    __tablename__ = "blob_holders"
    content_hash: Mapped[str] = mapped_column(Hex32, primary_key=True)
    account: Mapped[str] = mapped_column(Address, primary_key=True)


class LeaseImage(Base):
    """A renter's lease image (a root file system tarball), content-addressed. One entry per
    (bytes, uploader); it is served to its uploader and to the provider of a lease whose
    renter-signed key names it, where that renter uploaded it (backend.lease_images)."""

    __tablename__ = "lease_images"
    content_hash: Mapped[str] = mapped_column(Hex32, primary_key=True)
    owner: Mapped[str] = mapped_column(Address, primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class JobSpecRecord(Base):
    """A job spec's canonical JSON, stored by its specHash so providers can read what was funded."""

    __tablename__ = "job_specs"
    spec_hash: Mapped[str] = mapped_column(Hex32, primary_key=True)
    canonical: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Hex32)
    item_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class JobOutput(Base):
    """One item's output bytes (in the blob store), verified against the on-chain output root."""

    __tablename__ = "job_outputs"
    job_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    item_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(Hex32)
    proof: Mapped[list[str]] = mapped_column(JSON)
    size: Mapped[int] = mapped_column(BigInteger)


class ProviderProfile(Base):
    """What a provider declares off-chain (signed in): cached models, privacy, latency, queue."""

    __tablename__ = "provider_profiles"
    address: Mapped[str] = mapped_column(Address, primary_key=True)
    cached_models: Mapped[list[str]] = mapped_column(JSON, default=list)
    private_ok: Mapped[bool] = mapped_column(Boolean, default=False)
    latency_ms: Mapped[int | None] = mapped_column(Integer, nullable=True)
    mining_floor_wei_per_hour: Mapped[int | None] = mapped_column(Wei, nullable=True)
    miner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    hashrate: Mapped[float | None] = mapped_column(Float, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # The agent's last heartbeat (POST /providers/{address}/heartbeat): a provider silent for
    # longer than the backend's stale bound is not offered to renters (it crashed or left).
    last_seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Dispatch(Base):
    """A funded job handed to its provider's queue once (the row makes dispatch idempotent)."""

    __tablename__ = "dispatches"
    job_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    queue: Mapped[str] = mapped_column(String(64))
    task_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    queued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class JobFailure(Base):
    """A provider's report that it could not run a job (the renter's refund is on-chain)."""

    __tablename__ = "job_failures"
    job_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    kind: Mapped[str] = mapped_column(String(64))
    error: Mapped[str] = mapped_column(Text)
    reported_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class DisputeReport(Base):
    """A staked verifier's account of one decision with its evidence (off-chain: the chain holds
    the decision's transaction, this holds why; kept by a rebuild, like uploads)."""

    __tablename__ = "dispute_reports"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    verifier: Mapped[str] = mapped_column(Address, index=True)
    kind: Mapped[str] = mapped_column(String(8))
    subject: Mapped[int] = mapped_column(BigInteger, index=True)
    challenge_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)
    decision: Mapped[str] = mapped_column(String(32))
    indices: Mapped[list[int]] = mapped_column(JSON, default=list)
    expected_digests: Mapped[list[str | None]] = mapped_column(JSON, default=list)
    received_digests: Mapped[list[str | None]] = mapped_column(JSON, default=list)
    tx_hashes: Mapped[list[str]] = mapped_column(JSON, default=list)
    detail: Mapped[str] = mapped_column(Text, default="")
    reported_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class PogDevice(Base):
    """One device of a PoG round as its verifier recorded it: what the prover's NVML reported (a
    claim) and the outcome of its confidential-computing attestation for the round's seed
    (attested / not supported / not reported / not checked / failed: reason). Off-chain, sent by
    the round's own verifier (PUT /pog/rounds/{id}/devices)."""

    __tablename__ = "pog_devices"
    round_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    gpu_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    verifier: Mapped[str] = mapped_column(Address)
    name: Mapped[str | None] = mapped_column(String(96), nullable=True)
    uuid: Mapped[str | None] = mapped_column(String(96), nullable=True)
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    serial: Mapped[str | None] = mapped_column(String(30), nullable=True)
    driver_version: Mapped[str | None] = mapped_column(String(80), nullable=True)
    cc_mode: Mapped[str | None] = mapped_column(String(16), nullable=True)
    attestation: Mapped[str] = mapped_column(String(200))
    reported_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class SiweNonce(Base):
    __tablename__ = "siwe_nonces"
    nonce: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used: Mapped[bool] = mapped_column(Boolean, default=False)


class AuthSession(Base):
    __tablename__ = "sessions"
    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    address: Mapped[str] = mapped_column(Address, index=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


CHAIN_TABLES: tuple[type[Base], ...] = (
    IndexerCursor, ChainEvent, Provider, Stake, PogRound, Job, Lease, Challenge, Dispute, Payment,
)
