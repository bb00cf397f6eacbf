"""Wire schemas: what the API accepts and returns, separate from the database models.

Amounts in wei are decimal strings (uint256 does not fit a JSON number safely)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_serializer

from protocol.lease_access import NO_IMAGE
from protocol.pog.identity import CC_MODES, DRIVER_CHARS, NAME_CHARS, SERIAL_CHARS, UUID_CHARS
from protocol.pog.messages import MAX_GPUS

ADDRESS_PATTERN = r"^0x[0-9a-fA-F]{40}$"
HASH_PATTERN = r"^0x[0-9a-f]{64}$"
AddressStr = Annotated[str, Field(pattern=ADDRESS_PATTERN, examples=["0x70997970c51812dc3a010c7d01b50e0d17dc79c8"])]
HashStr = Annotated[str, Field(pattern=HASH_PATTERN)]


def _in_utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes even from DateTime(timezone=True) columns; every time the
    # API stores is UTC, so a naive one is UTC. OpenAPI's date-time (RFC 3339) requires the zone.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_in_utc)]


class WeiModel(BaseModel):
    """Read from ORM rows; subclasses list their wei fields in a serializer (decimal strings)."""

    model_config = ConfigDict(from_attributes=True)


def _wei(value: int | None) -> str | None:
    return None if value is None else str(value)


class DeploymentPublic(BaseModel):
    """Where the contracts live, for a browser wallet: the chain to be on and the addresses to
    read from and send to (the ABIs are in deployments/<chainId>.json)."""

    chain_id: int
    contracts: dict[str, str] = Field(description="contract name -> address")


class Health(BaseModel):
    status: str
    database: str
    chain_id: int | None
    head_block: int | None
    indexed_block: int | None


class ProviderPublic(WeiModel):
    address: str
    gpu_model: str
    gpu_count: int
    gpu_class: str | None = Field(description="GPU class verified by the last Proof-of-GPU round")
    tflops: float | None = Field(description="measured TFLOPS of the last passed round")
    pog_passed: bool | None
    pog_round_id: int | None
    price_per_gpu_hour: int
    price_per_job_unit: int
    active: bool
    reputation: float = Field(description="share of challenges survived (Laplace prior)")
    challenges_won: int
    challenges_lost: int
    jobs_finalized: int
    metadata_uri: str
    stake_bonded: int
    cached_models: list[str]
    private_ok: bool
    latency_ms: int | None
    mining_floor_wei_per_hour: int | None
    miner: str | None = None
    hashrate: float | None = Field(default=None, description="hashes per second, as the provider reports")
    last_seen_at: datetime | None = Field(default=None, description="the agent's last heartbeat (None: never)")
    agent_silent: bool = Field(default=False, description=(
        "its agent has sent heartbeats but none within the backend's bound (crashed or stopped)"))
    stake_slashed: int = Field(default=0, description="wei its stake lost to slashes, all told")
    available: bool = Field(default=True, description=(
        "a renter can count on it now (protocol.availability, the rule the matcher and `unchained provider "
        "list` apply): active on-chain (not deactivated, bonded stake at least the registry's minimum), its "
        "last Proof of GPU round passed and no slash since, its agent not silent past the backend's bound"))
    why_not: list[str] = Field(default_factory=list, description=(
        "why a renter cannot count on it now, in words (empty: available, and the matcher offers it)"))

    @field_serializer("price_per_gpu_hour", "price_per_job_unit", "stake_bonded", "stake_slashed",
                      "mining_floor_wei_per_hour")
    def _amounts(self, v: int | None) -> str | None:
        return _wei(v)


class ProviderProfileUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cached_models: list[HashStr] = Field(default_factory=list, max_length=256)
    private_ok: bool = False
    latency_ms: int | None = Field(default=None, ge=0, le=600_000)
    mining_floor_wei_per_hour: Annotated[str, Field(pattern=r"^[0-9]{1,78}$")] | None = None


class MiningReport(BaseModel):
    """The provider agent's report (field names as the agent sends them)."""

    miningYieldWeiPerGpuHour: Annotated[str, Field(pattern=r"^[0-9]{1,78}$")]  # noqa: N815
    miner: str = Field(default="", max_length=64)
    hashrate: float = Field(default=0.0, ge=0, le=1e30)


class FailureReport(BaseModel):
    """A provider's report that a job could not run (field names as the agent sends them)."""

    jobId: int | None = Field(default=None, ge=0, le=2**63 - 1)  # noqa: N815
    kind: str = Field(max_length=64)
    error: str = Field(max_length=4096)


CcMode = Literal[CC_MODES]  # type: ignore[valid-type]
# NVML's strings as the protocol bounds them (protocol.pog.identity): printable ASCII.
_PRINTABLE = r"^[\x20-\x7e]+$"


class PogDeviceIn(BaseModel):
    """One device of a round as its verifier recorded it; the identity fields are null where the
    prover reported none (a CPU, a prover without NVML)."""

    model_config = ConfigDict(extra="forbid")

    gpu_index: int = Field(ge=0, lt=MAX_GPUS)
    name: str | None = Field(default=None, max_length=NAME_CHARS, pattern=_PRINTABLE)
    uuid: str | None = Field(default=None, max_length=UUID_CHARS, pattern=_PRINTABLE)
    memory_bytes: int | None = Field(default=None, ge=0, le=2**63 - 1)
    serial: str | None = Field(default=None, max_length=SERIAL_CHARS, pattern=_PRINTABLE)
    driver_version: str | None = Field(default=None, max_length=DRIVER_CHARS, pattern=_PRINTABLE)
    cc_mode: CcMode | None = None
    attestation: str = Field(min_length=1, max_length=200,
                             description="attested: chip and board / not supported / not reported / "
                                         "not checked: SDK not installed / failed: reason")


class PogDevicesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    devices: list[PogDeviceIn] = Field(min_length=1, max_length=MAX_GPUS)


class PogDevicePublic(PogDeviceIn):
    model_config = ConfigDict(from_attributes=True)

    verifier: str
    reported_at: UtcDatetime


class PogRoundPublic(WeiModel):
    round_id: int
    provider: str
    verifier: str
    n: int
    gpu_count: int
    status: str
    requested_block: int
    commit_deadline: int
    seed: str | None
    roots: list[str] | None
    measured_millis: int | None
    gpu_class: str | None
    tflops_milli: int | None
    passed: bool | None
    devices: list[PogDevicePublic] = Field(
        default_factory=list, description="each device as the round's verifier recorded it: NVML's identity "
                                          "(a claim) and its CC attestation outcome")


class JobPublic(WeiModel):
    job_id: int
    renter: str
    provider: str
    token: str
    price: int
    spec_hash: str
    deadline: int
    status: str
    frozen: bool
    funded_tx: str
    funded_block: int
    output_root: str | None
    item_count: int | None
    result_digest: str | None
    challenge_window_end: int | None
    cancellable_at: int | None  # a requested cancel refunds from then on, unless the provider commits first
    provider_amount: int | None
    fee: int | None
    refund: int | None
    spec: dict | None = None  # type: ignore[type-arg]
    dispatched_to: str | None = None
    failure: str | None = Field(default=None, description=(
        "why the job failed: the provider's on-chain reason (JobFailed), else its off-chain report"))
    signed_output_root: str | None = None
    result_available_at: datetime | None = Field(default=None, description=(
        "when the backend got the provider's signed result: the renter has the result from then"))
    commit_matches_signed: bool | None = Field(default=None, description=(
        "whether the on-chain commit is the signed result (false: slashable); null until both exist"))
    failure_reason: str | None = Field(default=None, description="the reason in the JobFailed event, if any")

    @field_serializer("price", "provider_amount", "fee", "refund")
    def _amounts(self, v: int | None) -> str | None:
        return _wei(v)


class ModelCheckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    inputs: list[HashStr] = Field(min_length=1, max_length=16, description="input items run as one batch")


class ModelCheck(BaseModel):
    """A dry run's verdict: whether the model loads and runs the given items."""

    model: str
    format: str
    items: int
    ok: bool
    stage: str = Field(description="ok, or where it failed: load, input, run, limits (time or memory here)")
    error: str | None = None
    output_shape: list[int] | None = Field(default=None, description="one item's output shape")
    output_dtype: str | None = None


class JobSpecStored(BaseModel):
    spec_hash: str
    canonical: str
    item_count: int


class ResultItem(BaseModel):
    index: int
    digest: str | None = Field(description="keccak256 of the item's output bytes; null until uploaded")
    proof: list[str] | None = Field(description="sibling hashes, bottom-up (PROTOCOL.md)")
    size: int | None
    url: str | None


class SignedResult(BaseModel):
    """The provider's EIP-712 JobResult (protocol/job_result.py) as signed: the renter's evidence
    to slash a commit that differs from it, or a missing commit, with JobEscrow."""

    jobId: int  # noqa: N815  field names as signed
    outputRoot: str  # noqa: N815
    itemCount: int  # noqa: N815
    resultDigest: str  # noqa: N815
    commitBy: int  # noqa: N815  chain time by which the provider promised its commit
    provider: str
    signature: str


class SignedResultShown(SignedResult):
    """The signed result as GET /jobs/{id}/result shows it, with what it binds the provider to."""

    binding: bool = Field(description="commitBy is before the job's deadline: a missing commit is slashable with "
                                      "this signature; not binding: only a commit of another result is")


class JobResultPublic(BaseModel):
    job_id: int
    output_root: str = Field(description="the committed root once on-chain, else the signed one")
    item_count: int
    committed: bool = Field(description="whether the chain holds the result (else: signed, commit pending)")
    signed: SignedResultShown | None = Field(default=None, description="the provider's signed result, if delivered")
    result_available_at: datetime | None = None
    commit_matches_signed: bool | None = None
    leaf: str = "leaf = keccak256(0x00 || digest); node = keccak256(0x01 || left || right)"
    items: list[ResultItem]


class OutputItem(BaseModel):
    index: int
    data: str = Field(description="the item's output bytes, base64")
    proof: list[str] = Field(default=[], description="0x-hex sibling hashes of the item's digest, bottom-up")


class OutputStored(BaseModel):
    job_id: int
    index: int
    digest: str
    size: int


class ResultDelivery(SignedResult):
    """The signed result and, in the same request, outputs under its root (PUT
    /jobs/{id}/signed-result): a job of small outputs reaches the renter in one request."""

    outputs: list[OutputItem] = Field(default=[], description="items under the signed root, as PUT /jobs/{id}/outputs")


class ResultDelivered(SignedResult):
    outputs: list[OutputStored] = Field(description="the outputs stored with it (the delivery's, all or none)")


class OutputsUpload(BaseModel):
    """Several items' outputs of one job in one request (PUT /jobs/{id}/outputs), all or nothing."""

    items: list[OutputItem] = Field(min_length=1)


class OutputsPage(BaseModel):
    """Outputs of one job, several in one answer (GET /jobs/{id}/outputs): each checkable by its
    proof against the job's root, as one item's download is."""

    items: list[OutputItem]
    missing: list[int] = Field(description="asked items with no output uploaded (yet)")
    left: list[int] = Field(description="asked items not in this answer (its size bound): ask again for them")


class InputItem(BaseModel):
    index: int
    content_hash: str = Field(description="the input's keccak256, as the job spec names it")
    data: str = Field(description="the input's bytes, base64")


class InputsPage(BaseModel):
    """Inputs of one job, several in one answer (GET /jobs/{id}/inputs)."""

    items: list[InputItem]
    missing: list[int] = Field(description="asked items whose input the backend does not hold")
    left: list[int] = Field(description="asked items not in this answer (its size bound): ask again for them")


class ModelPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    content_hash: str
    owner: str
    name: str
    format: str
    size: int
    private: bool
    created_at: UtcDatetime


class InputStored(BaseModel):
    content_hash: str
    size: int


class InputsUpload(BaseModel):
    """Several inputs in one request (POST /inputs/batch)."""

    items: list[str] = Field(min_length=1, description="each input's bytes, base64")


class LeaseImageStored(BaseModel):
    content_hash: str
    size: int


class LeasePublic(WeiModel):
    lease_id: int
    renter: str
    provider: str
    gpu_count: int
    ends_at: int
    paid: int
    status: str
    ended_by: str | None
    provider_earned: int | None
    renter_refund: int | None
    ssh_public_key: str | None = None  # EIP-712 LeaseKey signed by the renter (key_signature)
    image: str | None = None  # the LeaseKey's image (zero: the provider's default system)
    key_signature: str | None = None
    access: dict[str, Any] | None = None  # EIP-712 LeaseAccess signed by the provider (access_signature)
    access_signature: str | None = None

    @field_serializer("paid", "provider_earned", "renter_refund")
    def _amounts(self, v: int | None) -> str | None:
        return _wei(v)


SignatureStr = Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]{130}$")]


class LeaseKeyIn(BaseModel):
    """The renter's SSH public key and image for a lease, signed by the renter's wallet
    (protocol.lease_access.LeaseKey); the image is zero for the provider's default system."""
    sshPublicKey: str = Field(max_length=8192)
    image: str = Field(default=NO_IMAGE, pattern=HASH_PATTERN,
                       description="keccak256 of a lease image you uploaded (POST /lease-images), or zero")
    signature: SignatureStr


class LeaseAccessIn(BaseModel):
    """Where the lease's machine answers, signed by the provider (protocol.lease_access.LeaseAccess)."""
    host: str = Field(max_length=253)
    port: int = Field(gt=0, lt=65536)
    user: str = Field(max_length=32)
    hostKeyFingerprint: str = Field(max_length=64)
    signature: SignatureStr


ReportDecision = Literal["passed", "challenged", "escalated", "voted_fault", "voted_no_fault",
                         "fraud_proven", "timeout_claimed", "settled"]
MAX_REPORT_ITEMS = 256  # a challenge samples k items (k is small on-chain); room to spare


class DisputeReportIn(BaseModel):
    """A staked verifier's decision with its evidence (field names as the verifier sends them)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["job", "pog"]
    subject: int = Field(ge=0, le=2**63 - 1, description="job id or PoG round id")
    challengeId: int | None = Field(default=None, ge=0, le=2**63 - 1)  # noqa: N815
    decision: ReportDecision
    indices: list[Annotated[int, Field(ge=0, le=2**63 - 1)]] = Field(default_factory=list, max_length=MAX_REPORT_ITEMS)
    # One entry per index when given; null where there is nothing to compare (an item missing).
    expectedDigests: list[HashStr | None] = Field(default_factory=list, max_length=MAX_REPORT_ITEMS)  # noqa: N815
    receivedDigests: list[HashStr | None] = Field(default_factory=list, max_length=MAX_REPORT_ITEMS)  # noqa: N815
    txHashes: list[HashStr] = Field(default_factory=list, max_length=16)  # noqa: N815
    detail: str = Field(default="", max_length=2000)


class DisputeReportPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    verifier: str
    kind: str
    subject: int
    challenge_id: int | None
    decision: str
    indices: list[int]
    expected_digests: list[str | None]
    received_digests: list[str | None]
    tx_hashes: list[str]
    detail: str
    reported_at: UtcDatetime


class ChallengePublic(WeiModel):
    challenge_id: int
    kind: str
    subject: int
    gpu_index: int | None
    challenger: str
    provider: str
    k: int
    bond: int
    response_deadline: int
    randomness: str | None
    status: str
    dispute_id: int | None
    reports: list[DisputeReportPublic] = Field(default_factory=list,
                                               description="verifiers' decisions with their evidence")

    @field_serializer("bond")
    def _amounts(self, v: int) -> str:
        return str(v)


class DisputePublic(WeiModel):
    dispute_id: int
    ref: int
    opener: str
    challenger: str
    provider: str
    vote_end: int
    votes: int
    verdict: str | None
    weight_provider_at_fault: int
    weight_challenger_wrong: int

    @field_serializer("weight_provider_at_fault", "weight_challenger_wrong")
    def _amounts(self, v: int) -> str:
        return str(v)


class SlashPublic(BaseModel):
    """One slash of a staked party as the chain recorded it: Staking's Slashed event (what was
    taken and who got the reward) with its cause from the same transaction (JobEscrow's
    SignedResultSlashed or ChallengeManager's OffenderSlashed)."""

    tx_hash: str
    block_number: int
    offender: str
    requested: int = Field(description="wei the slashing contract asked for")
    slashed: int = Field(description="wei taken (at most what the offender had staked)")
    reward_recipient: str
    reward: int = Field(description="wei of the slash credited to reward_recipient; the rest went to the treasury")
    cause: Literal["signed result", "challenge"] | None = Field(
        default=None, description="signed result: JobEscrow.slashSignedResult; challenge: a lost challenge or dispute")
    job_id: int | None = None
    challenge_id: int | None = None

    @field_serializer("requested", "slashed", "reward")
    def _amounts(self, v: int) -> str:
        return str(v)


class QuoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: HashStr | None = None
    items: int = Field(ge=1, le=100_000)
    private: bool = False
    max_price_wei: Annotated[str, Field(pattern=r"^[0-9]{1,78}$")] | None = None
    gpu_classes: list[Annotated[str, Field(max_length=32)]] | None = Field(default=None, max_length=64)


class Quote(BaseModel):
    provider: str
    price_wei: str
    score: float
    gpu_class: str | None
    reasons: list[str]


class QuoteExplanation(BaseModel):
    """Why POST /quotes would answer an empty list for this request (`fits` true: it would not)."""

    fits: bool
    reason: str | None = Field(default=None, description=(
        "no-providers | none-active | none-available | none-verified | none-in-class | none-private | "
        "price-too-low"))
    message: str | None = None
    cheapest_price_wei: str | None = Field(default=None, description="for the whole job, when the price is why")


class NonceIssued(BaseModel):
    nonce: str
    expires_at: UtcDatetime
    domain: str
    uri: str
    chain_id: int


class SiweMessageIssued(BaseModel):
    message: str
    nonce: str


class FundingTx(BaseModel):
    """An unsigned transaction for the renter's wallet to sign and send (EIP-1193 eth_sendTransaction)."""

    to: str
    data: str
    value: str = Field(description="wei, decimal")
    chain_id: int


class LoginRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(max_length=4096)
    signature: Annotated[str, Field(pattern=r"^(0x)?[0-9a-fA-F]{130}$")]


class SessionPublic(BaseModel):
    token: str
    address: str
    expires_at: UtcDatetime


class Me(BaseModel):
    address: str


class ErrorBody(BaseModel):
    detail: str
