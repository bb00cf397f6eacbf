"""Signed Celery tasks and replies: the EIP-712 messages every party signs and checks.

A task's headers carry its sender's signature over the task name, the queue it was sent to, a
hash of its arguments, an expiry and a random nonce (so that neither another queue nor a later
time can reuse it). What else a Celery message can ask of a worker is not signed, so a consumer
refuses it outright: a task that names further work (`COMPOSITION_FIELDS`: callbacks, errbacks,
a chain or a chord, which the worker would publish signed with its own key) is dropped, since no
party of the product composes tasks. A reply carries the worker's signature over the task id,
that task's nonce and a hash of the result. Who may send which task is decided by the consumer from the chain
(`TASK_SENDERS` names the roles); checking and signing, which need keys and the chain, live in
`client.task_auth`. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from eth_utils import keccak

from protocol.tasks import (
    TASK_LEASE,
    TASK_POG_ANSWER,
    TASK_POG_FILL,
    TASK_POG_PROBE,
    TASK_POG_ROUND,
    TASK_RUN_JOB,
)

DOMAIN_NAME = "Unchained tasks"
DOMAIN_VERSION = "1"
HEADER = "unchained_auth"  # the message header that carries a task's signature
MAX_TTL_S = 7 * 24 * 3600  # no signature is valid longer: a nonce is remembered that long at most

_HEX32 = re.compile(r"^0x[0-9a-fA-F]{64}$")
_SIGNATURE = re.compile(r"^0x[0-9a-fA-F]{130}$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")

TASK_TYPES = {
    "Task": [
        {"name": "task", "type": "string"},
        {"name": "queue", "type": "string"},
        {"name": "argsHash", "type": "bytes32"},
        {"name": "expiry", "type": "uint64"},
        {"name": "nonce", "type": "bytes32"},
    ],
}
REPLY_TYPES = {
    "Reply": [
        {"name": "taskId", "type": "string"},
        {"name": "taskNonce", "type": "bytes32"},
        {"name": "resultHash", "type": "bytes32"},
        {"name": "expiry", "type": "uint64"},
    ],
}


class Role(str, Enum):
    """Who may send a task, as the consumer sees it on the chain."""

    SELF = "self"  # the consumer itself (retries, follow-up tasks on its own queue)
    DISPATCHER = "dispatcher"  # the backend operator's dispatch key (Deployment.dispatcher)
    # The verifier that requested, on chain, the PoG round named by the task's first argument
    # (ProofOfGpu.round(id).verifier) for this very consumer: a stake alone is not enough, since
    # any staked account (another provider too) may request rounds.
    ROUND_VERIFIER = "round-verifier"
    # The consumer itself, re-sending a task with exactly the arguments (a retry, a lease's next
    # look, a killed job's resumption) that the dispatcher sent it before: its own key alone
    # starts no job and hands over no GPUs.
    RESENT = "resent"


# Tasks not named here may be sent by their consumer only (provider-internal tasks).
TASK_SENDERS: dict[str, frozenset[Role]] = {
    TASK_RUN_JOB: frozenset({Role.DISPATCHER, Role.RESENT}),
    TASK_LEASE: frozenset({Role.DISPATCHER, Role.RESENT}),
    TASK_POG_ROUND: frozenset({Role.SELF, Role.ROUND_VERIFIER}),
    TASK_POG_ANSWER: frozenset({Role.SELF, Role.ROUND_VERIFIER}),
    TASK_POG_FILL: frozenset({Role.SELF, Role.ROUND_VERIFIER}),
    TASK_POG_PROBE: frozenset({Role.SELF, Role.ROUND_VERIFIER}),
}


def senders_of(task: str) -> frozenset[Role]:
    return TASK_SENDERS.get(task, frozenset({Role.SELF}))


# Fields of a Celery message (body's embed or headers; Celery merges both into the request) that
# make the worker publish more tasks after or instead of this one, under its own signature.
# `group`, `root_id`, `parent_id` and `replaced_task_nesting` only label a task; `reply_to` and
# `correlation_id` address replies on Celery's rpc:// result backend, which no party configures
# (replies are stored by task id, and each is signed for its task's id and nonce).
COMPOSITION_FIELDS = ("callbacks", "errbacks", "chain", "chord")


def composition_of(request: Any) -> list[str]:
    """The composition fields a task's request sets (empty for a plain task)."""
    return [name for name in COMPOSITION_FIELDS if getattr(request, name, None)]


class BadTaskAuth(ValueError):
    """A signature header or reply envelope that is malformed (before any key is checked)."""


@dataclass(frozen=True)
class TaskDomain:
    """The EIP-712 domain: one chain and one deployment (its ProviderRegistry), so a message
    signed for a test deployment is worthless on another."""

    chain_id: int
    verifying_contract: str

    def to_json(self) -> dict[str, Any]:
        return {"name": DOMAIN_NAME, "version": DOMAIN_VERSION, "chainId": self.chain_id,
                "verifyingContract": self.verifying_contract}


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def args_hash(args: Any, kwargs: Any) -> bytes:
    return keccak(canonical_json([list(args or ()), dict(kwargs or {})]))


def result_hash(result: Any) -> bytes:
    return keccak(canonical_json(result))


def task_typed_data(domain: TaskDomain, task: str, queue: str, args: Any, kwargs: Any, expiry: int,
                    nonce: bytes) -> dict[str, Any]:
    """The full EIP-712 message of a task (eth-account's `encode_typed_data(full_message=...)`)."""
    return {"types": {"EIP712Domain": _DOMAIN_TYPE, **TASK_TYPES}, "primaryType": "Task", "domain": domain.to_json(),
            "message": {"task": task, "queue": queue, "argsHash": args_hash(args, kwargs), "expiry": expiry,
                        "nonce": nonce}}


def reply_typed_data(domain: TaskDomain, task_id: str, task_nonce: bytes, result: Any,
                     expiry: int) -> dict[str, Any]:
    return {"types": {"EIP712Domain": _DOMAIN_TYPE, **REPLY_TYPES}, "primaryType": "Reply",
            "domain": domain.to_json(),
            "message": {"taskId": task_id, "taskNonce": task_nonce, "resultHash": result_hash(result),
                        "expiry": expiry}}


_DOMAIN_TYPE = [
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
]


@dataclass(frozen=True)
class TaskSignature:
    """What a task's `unchained_auth` header holds."""

    sender: str
    expiry: int
    nonce: bytes
    signature: bytes

    def to_json(self) -> dict[str, Any]:
        return {"sender": self.sender, "expiry": self.expiry, "nonce": "0x" + self.nonce.hex(),
                "signature": "0x" + self.signature.hex()}

    @classmethod
    def from_json(cls, doc: Any) -> TaskSignature:
        if not isinstance(doc, dict):
            raise BadTaskAuth("no signature header")
        sender, expiry, nonce, signature = (doc.get(k) for k in ("sender", "expiry", "nonce", "signature"))
        if not (isinstance(sender, str) and _ADDRESS.match(sender)):
            raise BadTaskAuth(f"sender is not an address: {str(sender)[:64]!r}")
        if not (isinstance(expiry, int) and 0 < expiry < 2**64):
            raise BadTaskAuth("expiry is not a uint64")
        if not (isinstance(nonce, str) and _HEX32.match(nonce)):
            raise BadTaskAuth("nonce is not 32 bytes of hex")
        if not (isinstance(signature, str) and _SIGNATURE.match(signature)):
            raise BadTaskAuth("signature is not 65 bytes of hex")
        return cls(sender, expiry, bytes.fromhex(nonce[2:]), bytes.fromhex(signature[2:]))


@dataclass(frozen=True)
class SignedReply:
    """A task's return value as the worker sends it: the result and the worker's signature."""

    result: Any
    signer: str
    expiry: int
    signature: bytes

    def to_json(self) -> dict[str, Any]:
        return {"result": self.result, "signer": self.signer, "expiry": self.expiry,
                "signature": "0x" + self.signature.hex()}

    @classmethod
    def from_json(cls, doc: Any) -> SignedReply:
        if not (isinstance(doc, dict) and set(doc) == {"result", "signer", "expiry", "signature"}):
            raise BadTaskAuth("the reply is not a signed reply")
        signer, expiry, signature = doc["signer"], doc["expiry"], doc["signature"]
        if not (isinstance(signer, str) and _ADDRESS.match(signer)):
            raise BadTaskAuth("reply signer is not an address")
        if not (isinstance(expiry, int) and 0 < expiry < 2**64):
            raise BadTaskAuth("reply expiry is not a uint64")
        if not (isinstance(signature, str) and _SIGNATURE.match(signature)):
            raise BadTaskAuth("reply signature is not 65 bytes of hex")
        return cls(doc["result"], signer, expiry, bytes.fromhex(signature[2:]))
