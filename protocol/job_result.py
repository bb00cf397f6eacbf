"""A job's result as its provider signs it: the EIP-712 message that reaches the renter at once.

The provider signs `JobResult(jobId, outputRoot, itemCount, resultDigest, commitBy)` as soon as
the job is computed and hands it (with the outputs) to the backend; the on-chain commit of the
same four result values follows later, in a batch, by `commitBy` (chain time) as the provider
promises. The signature binds the provider to what it will commit: JobEscrow slashes a provider
whose commit differs from a result it signed (whatever commitBy says), or who signed a result
with a margin (commitBy < the job's deadline: `binding`) and never committed it before the
deadline. A result signed with commitBy at or after the deadline is "not binding": it still
proves what the provider computed, but no missing commit can be slashed with it. The domain is
JobEscrow's own (name, version, chain id, address), so the contract checks the very digest
computed here. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_keys.exceptions import BadSignature
from eth_utils import keccak

from protocol.errors import ProtocolError

DOMAIN_NAME = "Unchained JobEscrow"
DOMAIN_VERSION = "1"
MAX_ITEM_COUNT = 2**32 - 1  # JobEscrow.MAX_ITEM_COUNT
MAX_COMMIT_BY = 2**64 - 1  # uint64

_DOMAIN_TYPE = [{"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"}]
JOB_RESULT_TYPES = {
    "JobResult": [
        {"name": "jobId", "type": "uint256"},
        {"name": "outputRoot", "type": "bytes32"},
        {"name": "itemCount", "type": "uint256"},
        {"name": "resultDigest", "type": "bytes32"},
        {"name": "commitBy", "type": "uint64"},
    ],
}

# EIP-712 type hashes of the domain and the message, as JobEscrow's constants hold them.
_DOMAIN_TYPEHASH = keccak(b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")
_JOB_RESULT_TYPEHASH = keccak(b"JobResult(uint256 jobId,bytes32 outputRoot,uint256 itemCount,bytes32 resultDigest,"
                               b"uint64 commitBy)")

_HEX32 = re.compile(r"^0x[0-9a-fA-F]{64}$")
_SIGNATURE = re.compile(r"^0x[0-9a-fA-F]{130}$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


class JobResultError(ProtocolError):
    """A signed job result that is malformed (before any signature is checked)."""


@dataclass(frozen=True)
class EscrowDomain:
    """JobEscrow's EIP-712 domain on one chain."""

    chain_id: int
    escrow: str

    def to_json(self) -> dict[str, Any]:
        return {"name": DOMAIN_NAME, "version": DOMAIN_VERSION, "chainId": self.chain_id,
                "verifyingContract": self.escrow}

    @cached_property
    def separator(self) -> bytes:
        """EIP-712's domain separator, computed once per domain: every result signed under it
        then costs one struct hash (eth-account's encode_typed_data rebuilt the domain's hash and
        re-parsed both type lists at every signature, a third of a provider's signing time)."""
        return keccak(_DOMAIN_TYPEHASH + keccak(DOMAIN_NAME.encode()) + keccak(DOMAIN_VERSION.encode())
                      + self.chain_id.to_bytes(32, "big") + bytes(12) + bytes.fromhex(self.escrow[2:]))


@dataclass(frozen=True)
class JobResult:
    """What the provider commits for a job, as signed (roots and digest as 0x-hex), and the chain
    time by which it promises the commit (`commit_by`, unix seconds)."""

    job_id: int
    output_root: str
    item_count: int
    result_digest: str
    commit_by: int

    def __post_init__(self) -> None:
        if not 0 < self.job_id < 2**256:
            raise JobResultError(f"job id {self.job_id}: out of range")
        for name in ("output_root", "result_digest"):
            if not _HEX32.match(getattr(self, name)):
                raise JobResultError(f"{name}: expected 0x and 64 hex digits")
        if not 0 < self.item_count <= MAX_ITEM_COUNT:
            raise JobResultError(f"item count {self.item_count}: outside 1..{MAX_ITEM_COUNT}")
        if not 0 <= self.commit_by <= MAX_COMMIT_BY:
            raise JobResultError(f"commitBy {self.commit_by}: outside 0..2^64-1")

    def binding(self, deadline: int) -> bool:
        """Whether the provider promised to commit before the job's `deadline` (it stated a
        margin), so that a missing commit is slashable with this result. A commit of another
        result is slashable either way."""
        return self.commit_by < deadline

    def as_tuple(self) -> tuple[int, bytes, int, bytes, int]:
        """IJobEscrow.JobResult as a contract call takes it."""
        return (self.job_id, bytes.fromhex(self.output_root[2:]), self.item_count,
                bytes.fromhex(self.result_digest[2:]), self.commit_by)

    def message(self) -> dict[str, Any]:
        return {"jobId": self.job_id, "outputRoot": bytes.fromhex(self.output_root[2:]),
                "itemCount": self.item_count, "resultDigest": bytes.fromhex(self.result_digest[2:]),
                "commitBy": self.commit_by}

    def typed_data(self, domain: EscrowDomain) -> dict[str, Any]:
        """The full EIP-712 message (eth-account's `encode_typed_data(full_message=...)`)."""
        return {"types": {"EIP712Domain": _DOMAIN_TYPE, **JOB_RESULT_TYPES}, "primaryType": "JobResult",
                "domain": domain.to_json(), "message": self.message()}

    def digest(self, domain: EscrowDomain) -> bytes:
        """The EIP-712 digest of `typed_data(domain)`: what is signed, and what JobEscrow
        recomputes. Every field is a static 32-byte word, so the struct hash is one keccak."""
        struct = keccak(_JOB_RESULT_TYPEHASH + self.job_id.to_bytes(32, "big") + bytes.fromhex(self.output_root[2:])
                        + self.item_count.to_bytes(32, "big") + bytes.fromhex(self.result_digest[2:])
                        + self.commit_by.to_bytes(32, "big"))
        return keccak(b"\x19\x01" + domain.separator + struct)


@dataclass(frozen=True)
class SignedJobResult:
    """A JobResult with its provider's address and signature, as it travels in JSON."""

    result: JobResult
    provider: str
    signature: str

    def __post_init__(self) -> None:
        if not _ADDRESS.match(self.provider):
            raise JobResultError("provider: expected a 0x address")
        if not _SIGNATURE.match(self.signature):
            raise JobResultError("signature: expected 0x and 130 hex digits")

    def to_json(self) -> dict[str, Any]:
        return {"jobId": self.result.job_id, "outputRoot": self.result.output_root,
                "itemCount": self.result.item_count, "resultDigest": self.result.result_digest,
                "commitBy": self.result.commit_by, "provider": self.provider, "signature": self.signature}

    @classmethod
    def sign(cls, result: JobResult, domain: EscrowDomain, account: Any) -> SignedJobResult:
        """`account` (an eth-account LocalAccount: pure, the key never leaves it) signs `result`:
        the EIP-712 digest that `encode_typed_data(full_message=result.typed_data(domain))` gives."""
        signed = account.unsafe_sign_hash(result.digest(domain))
        return cls(result, account.address, "0x" + bytes(signed.signature).hex())

    def signer(self, domain: EscrowDomain) -> str:
        """The address that really signed (checksummed); raises JobResultError for a signature
        that recovers to nobody. A caller compares it with the job's provider."""
        try:
            signer: str = Account.recover_message(encode_typed_data(full_message=self.result.typed_data(domain)),
                                                  signature=bytes.fromhex(self.signature[2:]))
            return signer
        except (ValueError, BadSignature) as exc:
            raise JobResultError(f"job {self.result.job_id}: signature does not recover: {exc}") from exc

    @classmethod
    def from_json(cls, doc: Any) -> SignedJobResult:
        if not isinstance(doc, dict):
            raise JobResultError("signed job result: expected a JSON object")
        try:
            if isinstance(doc["commitBy"], bool) or not isinstance(doc["commitBy"], int):
                raise TypeError("commitBy: expected integer seconds")
            result = JobResult(int(doc["jobId"]), str(doc["outputRoot"]), int(doc["itemCount"]),
                               str(doc["resultDigest"]), doc["commitBy"])
            return cls(result, str(doc["provider"]), str(doc["signature"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise JobResultError(f"signed job result: missing or malformed field ({exc})") from exc


class NotSlashable(JobResultError):
    """A signed result JobEscrow.slashSignedResult would not slash with now: `reason` says why;
    `from_time` (chain time) is when it will be, if it will be (a deadline still ahead)."""

    def __init__(self, job_id: int, reason: str, from_time: int | None = None) -> None:
        super().__init__(f"job {job_id}: {reason}")
        self.job_id = job_id
        self.reason = reason
        self.from_time = from_time


def slash_ground(result: JobResult, *, deadline: int, committed: tuple[str, int, str] | None, cancelled: bool,
                 already_slashed: bool, now: int) -> str:
    """Why JobEscrow.slashSignedResult slashes the provider with `result` now, as a sentence; raises
    NotSlashable otherwise. The contract's rule, for the renter's CLI and the verifier to decide
    before they send: `committed` is the job's committed (outputRoot, itemCount, resultDigest) as
    0x-hex (None: never committed), `now` the latest block's time."""
    job_id = result.job_id
    if already_slashed:
        raise NotSlashable(job_id, "its provider was already slashed with a signed result of it")
    if committed is not None:
        root, count, digest = committed
        if (root.lower(), count, digest.lower()) == (result.output_root.lower(), result.item_count,
                                                     result.result_digest.lower()):
            raise NotSlashable(job_id, "the committed result is the one its provider signed")
        return (f"the provider committed root {root} over {count} items, not the signed root "
                f"{result.output_root} over {result.item_count}")
    if cancelled:
        raise NotSlashable(job_id, "its renter cancelled it: a signed result of a cancelled job binds nobody")
    if not result.binding(deadline):
        raise NotSlashable(job_id, f"the signed result is not binding: it promised its commit by {result.commit_by}, "
                                   f"not before the deadline {deadline} (the provider stated no margin), so a "
                                   "missing commit is not slashable with it")
    if now < deadline:
        raise NotSlashable(job_id, f"no commit yet, but its deadline {deadline} has not passed", from_time=deadline)
    return (f"the provider promised its commit by {result.commit_by} and never committed before the deadline "
            f"{deadline}")
