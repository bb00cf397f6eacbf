"""IJobEscrow.Job: a job as JobEscrow hashes it into its one slot, and as its calls take it back.

The one shape of a job every party holds: the chain reader builds it (client.escrow_jobs), the
backend dispatches it (TASK_RUN_JOB carries `to_json()`), the provider keeps, commits and
finalizes it, the renter gets it back from its funding. Its state (status, freeze, times) is the
escrow's slot beside it (client.escrow_jobs.JobView).

JobEscrow keeps per job only a JobState (status, frozen, challenge window end and the first 24
bytes of keccak256(abi.encode(Job))). Whoever acts on a job (provider commits and finalizes,
refunds, challenges, slashes) passes the whole Job, rebuilt from the JobCreated event (every
term) and, once committed, the ResultCommitted event (the result). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from eth_abi import encode
from eth_utils import keccak, to_checksum_address

from protocol.errors import ProtocolError
from protocol.ids import JobId, Wei

ZERO32 = b"\0" * 32
# abi.encode(Job): the Solidity struct's fields in order (a static tuple encodes as its fields).
_ABI_TYPES = ["uint256", "address", "address", "address", "uint256", "bytes32", "uint64", "bytes32", "uint256",
              "bytes32"]


class EscrowJobError(ProtocolError):
    """A job record that cannot be an IJobEscrow.Job."""


def _bytes32(value: Any, name: str) -> bytes:
    raw = bytes.fromhex(value[2:]) if isinstance(value, str) and value.startswith("0x") else bytes(value)
    if len(raw) != 32:
        raise EscrowJobError(f"{name}: expected 32 bytes")
    return raw


def _integer(value: Any, name: str, low: int, high: int) -> int:
    """An int or a decimal string in [low, high) (not a float, not a bool: both would be silently
    truncated). JSON carries amounts as strings: its numbers lose precision above 2^53."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise EscrowJobError(f"{name}: expected an integer, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise EscrowJobError(f"{name}: expected an integer, got {value!r}") from None
    if not low <= number < high:
        raise EscrowJobError(f"{name}: {number} out of range")
    return number


@dataclass(frozen=True)
class EscrowJob:
    """IJobEscrow.Job; the result fields are zero until the job is committed."""

    id: JobId
    renter: str  # addresses checksummed by from_created (to_json writes them lower-case)
    provider: str
    token: str
    price: Wei
    spec_hash: bytes
    deadline: int
    output_root: bytes = ZERO32
    item_count: int = 0
    result_digest: bytes = ZERO32

    @classmethod
    def from_created(cls, args: Any) -> EscrowJob:
        """From JobCreated's arguments (a web3 event's `args`, or the same keys in a dict: a
        dispatch, a job row), checked as the escrow's types bound them."""
        try:
            return cls(JobId(_integer(args["jobId"], "jobId", 1, 2**256)), to_checksum_address(args["renter"]),
                       to_checksum_address(args["provider"]), to_checksum_address(args["token"]),
                       Wei(_integer(args["price"], "price", 0, 2**256)), _bytes32(args["specHash"], "specHash"),
                       _integer(args["deadline"], "deadline", 1, 2**64))
        except KeyError as exc:
            raise EscrowJobError(f"job lacks {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise EscrowJobError(f"JobCreated: malformed field ({exc})") from exc

    def committed(self, output_root: Any, item_count: int, result_digest: Any) -> EscrowJob:
        """The job with the result its ResultCommitted (or its commit call) carries."""
        return replace(self, output_root=_bytes32(output_root, "outputRoot"), item_count=int(item_count),
                       result_digest=_bytes32(result_digest, "resultDigest"))

    @property
    def is_committed(self) -> bool:
        return self.item_count != 0

    def as_tuple(self) -> tuple[Any, ...]:
        """The struct as web3.py and brownie take it in a call."""
        return (self.id, self.renter, self.provider, self.token, self.price, self.spec_hash, self.deadline,
                self.output_root, self.item_count, self.result_digest)

    def job_hash(self) -> bytes:
        """The 24 bytes JobEscrow keeps (JobState.jobHash, IJobEscrow.hashJob)."""
        return keccak(encode(_ABI_TYPES, list(self.as_tuple())))[:24]

    def to_json(self) -> dict[str, Any]:
        """JobCreated's keys (plus the result once committed), addresses lower-case hex, bytes as
        0x-hex, the price a decimal string: how the job travels in JSON (the TASK_RUN_JOB payload,
        docs/PROTOCOL.md; the provider's records)."""
        doc: dict[str, Any] = {"jobId": self.id, "renter": self.renter.lower(), "provider": self.provider.lower(),
                               "token": self.token.lower(), "price": str(self.price),
                               "specHash": "0x" + self.spec_hash.hex(), "deadline": self.deadline}
        if self.is_committed:
            doc.update(outputRoot="0x" + self.output_root.hex(), itemCount=self.item_count,
                       resultDigest="0x" + self.result_digest.hex())
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> EscrowJob:
        if not isinstance(doc, dict):
            raise EscrowJobError(f"expected the job as a JSON object, got {type(doc).__name__}")
        job = cls.from_created(doc)
        if "outputRoot" not in doc:
            return job
        try:
            return replace(job, output_root=_bytes32(doc["outputRoot"], "outputRoot"), item_count=int(doc["itemCount"]),
                           result_digest=_bytes32(doc["resultDigest"], "resultDigest"))
        except (KeyError, TypeError, ValueError) as exc:
            raise EscrowJobError(f"job: malformed result ({exc})") from exc
