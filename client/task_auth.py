"""Signs every Celery task and reply a party sends, and checks every one it consumes.

Hooked into Celery once, for every app built by `client.broker.party_celery`: `SigningAMQP`
adds the sender's EIP-712 signature (protocol.task_auth) to the headers of each message it
publishes, retries and follow-up tasks included; `SignedTask`, the base class of every task,
checks the signature, its expiry, its nonce and the sender's role on the chain before the task
runs, drops (rejects without requeue) and logs what fails, and signs the task's return value.
Callers read a reply with `TaskAuth.open_reply`, which checks the worker's signature.

A task that names further work (callbacks, errbacks, a chain or a chord: protocol.task_auth's
COMPOSITION_FIELDS) is dropped before anything else: the worker would publish that work signed
with its own key, and no signature covers those fields. `run_job` and `lease` come from the
dispatch key; the worker re-sends one itself (a retry, a lease's next look, a killed job resumed
at start) only with arguments the dispatcher sent it before, which it remembers beside its nonces.

A task whose sender cannot be checked because the chain does not answer is put back on the queue
(after a pause), not lost. Nonces are remembered in the consuming process until they expire, and marked used when their
task has run: a message redelivered because its worker died before finishing still runs (tasks
are idempotent), a copy of one that ran is refused. A provider's worker is one process (solo
pool); a worker of several processes would remember per process.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from celery import Task
from celery.app.amqp import AMQP
from celery.exceptions import Reject
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.exceptions import ContractCustomError, ContractLogicError

from client import contracts
from client.errors import TaskExpired, TaskRefused
from protocol.deployments import Deployment
from protocol.tasks import provider_queue
from protocol.task_auth import (HEADER, MAX_TTL_S, BadTaskAuth, Role, SignedReply, TaskDomain, TaskSignature,
                                args_hash, composition_of, reply_typed_data, senders_of, task_typed_data)

log = logging.getLogger(__name__)
DEFAULT_TTL_S = 600
REQUEUE_PAUSE_S = 1.0  # a task whose sender cannot be checked (node down) comes back at most this often


def domain_of(deployment: Deployment) -> TaskDomain:
    return TaskDomain(deployment.chain_id, deployment.contract("ProviderRegistry").address)


def dispatcher_of(deployment: Deployment) -> str:
    """The backend's dispatch key: the one the operator recorded in the deployment document
    (`operator.dispatcher`), else the deployer's."""
    return str(deployment.operator.get("dispatcher") or deployment.deployer)


def _recover(typed: dict[str, Any], signature: bytes) -> str:
    try:
        signer: str = Account.recover_message(encode_typed_data(full_message=typed), signature=signature)
        return signer
    except Exception as exc:  # eth-keys raises BadSignature, ValueError, ...
        raise TaskRefused(f"unreadable signature: {exc}") from None


class ChainRoles:
    """A consumer's view, from the chain, of which role an address holds."""

    def __init__(self, web3: Web3, deployment: Deployment, own_address: str) -> None:
        self.own = own_address.lower()
        self.dispatcher = dispatcher_of(deployment).lower()
        self.pog = contracts.deployed(web3, deployment, "ProofOfGpu")

    def holds(self, role: Role, address: str, args: Any) -> bool:
        if role is Role.SELF:
            return address.lower() == self.own
        if role is Role.DISPATCHER:
            return address.lower() == self.dispatcher
        if role is Role.ROUND_VERIFIER:
            if not (isinstance(args, (list, tuple)) and args and isinstance(args[0], int) and 0 < args[0] < 2**64):
                return False
            try:
                found = self.pog.functions.round(args[0]).call()
            except (ContractCustomError, ContractLogicError):  # no such round
                return False
            return bool(found.verifier.lower() == address.lower() and found.provider.lower() == self.own)
        return False


class UsedNonces:
    """Nonces of tasks that ran, until their signatures expire: in memory (a sender, a test) or,
    given a path, in an SQLite file, so that a task replayed after the worker restarts (its
    signature still valid for up to MAX_TTL_S) is refused as well. Beside them, the (task,
    arguments) the dispatcher sent, which the consumer may re-send itself (Role.RESENT): kept
    MAX_TTL_S after the last time they were sent, and across restarts (a killed job resumes)."""

    def __init__(self, path: Path | None = None) -> None:
        self._memory: dict[bytes, int] = {}
        self._dispatched: dict[tuple[str, bytes], int] = {}
        self._db: sqlite3.Connection | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            # One connection, used under TaskAuth's lock; autocommit: each nonce is durable at once.
            self._db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
            # WAL with synchronous=NORMAL: a committed nonce survives the worker's crash or restart
            # (only the OS crashing may lose the last few), without an fsync on every task (3 ms).
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS used_nonces (nonce BLOB PRIMARY KEY, expiry INTEGER NOT NULL)")
            self._db.execute("CREATE INDEX IF NOT EXISTS used_nonces_expiry ON used_nonces (expiry)")
            self._db.execute("CREATE TABLE IF NOT EXISTS dispatched (task TEXT NOT NULL, args_hash BLOB NOT NULL, "
                             "keep_until INTEGER NOT NULL, PRIMARY KEY (task, args_hash))")

    def __contains__(self, nonce: bytes) -> bool:
        if self._db is None:
            return nonce in self._memory
        return self._db.execute("SELECT 1 FROM used_nonces WHERE nonce = ?", (nonce,)).fetchone() is not None

    def add(self, nonce: bytes, expiry: int) -> None:
        if self._db is None:
            self._memory[nonce] = expiry
        else:
            self._db.execute("INSERT OR REPLACE INTO used_nonces (nonce, expiry) VALUES (?, ?)", (nonce, expiry))

    def remember_dispatched(self, task: str, digest: bytes, keep_until: int) -> None:
        if self._db is None:
            self._dispatched[(task, digest)] = keep_until
        else:
            self._db.execute("INSERT OR REPLACE INTO dispatched (task, args_hash, keep_until) VALUES (?, ?, ?)",
                             (task, digest, keep_until))

    def was_dispatched(self, task: str, digest: bytes) -> bool:
        if self._db is None:
            return (task, digest) in self._dispatched
        return self._db.execute("SELECT 1 FROM dispatched WHERE task = ? AND args_hash = ?",
                                (task, digest)).fetchone() is not None

    def forget_expired(self, now: float) -> None:
        if self._db is None:
            for nonce in [n for n, expiry in self._memory.items() if expiry < now]:
                del self._memory[nonce]
            for key in [k for k, keep_until in self._dispatched.items() if keep_until < now]:
                del self._dispatched[key]
        else:
            self._db.execute("DELETE FROM used_nonces WHERE expiry < ?", (int(now),))
            self._db.execute("DELETE FROM dispatched WHERE keep_until < ?", (int(now),))


@dataclass
class TaskAuth:
    """One party's signing key and, where it consumes tasks, its view of who may send them."""

    domain: TaskDomain
    account: LocalAccount
    roles: ChainRoles | None = None  # None: this party only sends
    ttl_s: int = DEFAULT_TTL_S
    clock: Callable[[], float] = time.time
    used: UsedNonces = field(default_factory=UsedNonces)  # of tasks that ran
    _sent: dict[str, tuple[bytes, int]] = field(default_factory=dict)  # task id -> (nonce, expiry)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- sending ---------------------------------------------------------------------------

    def sign_task(self, task_id: str, name: str, queue: str, args: Any, kwargs: Any,
                  eta: str | None = None) -> dict[str, Any]:
        start = datetime.fromisoformat(eta).timestamp() if eta else self.clock()
        expiry = int(max(start, self.clock())) + self.ttl_s
        nonce = os.urandom(32)
        typed = task_typed_data(self.domain, name, queue, args, kwargs, expiry, nonce)
        signature = self.account.sign_message(encode_typed_data(full_message=typed)).signature
        with self._lock:
            self._forget_expired()
            self._sent[task_id] = (nonce, expiry + self.ttl_s)
        return TaskSignature(self.account.address, expiry, nonce, bytes(signature)).to_json()

    def open_reply(self, task_id: str, reply: Any, signers: Iterable[str]) -> Any:
        """The result of a task this party sent, if the worker signed it for this very task and
        is one of `signers`; raises TaskRefused otherwise."""
        try:
            signed = SignedReply.from_json(reply)
        except BadTaskAuth as exc:
            raise TaskRefused(f"reply to {task_id}: {exc}") from None
        with self._lock:
            sent = self._sent.get(task_id)
        if sent is None:
            raise TaskRefused(f"reply to {task_id}: no such task was sent from here")
        if signed.expiry < self.clock():
            raise TaskRefused(f"reply to {task_id}: expired")
        typed = reply_typed_data(self.domain, task_id, sent[0], signed.result, signed.expiry)
        signer = _recover(typed, signed.signature)
        if signer.lower() != signed.signer.lower() or signer.lower() not in {s.lower() for s in signers}:
            raise TaskRefused(f"reply to {task_id}: signed by {signer}, not by whom it was sent to")
        return signed.result

    # -- consuming -------------------------------------------------------------------------

    def check_task(self, name: str, queue: str, args: Any, kwargs: Any, header: Any) -> TaskSignature:
        """The signature of a task about to run, if it holds; raises TaskRefused otherwise."""
        if self.roles is None:
            raise TaskRefused("this party consumes no tasks")
        try:
            sig = TaskSignature.from_json(header)
        except BadTaskAuth as exc:
            raise TaskRefused(str(exc)) from None
        now = self.clock()
        if sig.expiry < now:
            raise TaskExpired(f"expired {now - sig.expiry:.0f} s ago")
        if sig.expiry > now + MAX_TTL_S:
            raise TaskRefused("expiry too far ahead")
        signer = _recover(task_typed_data(self.domain, name, queue, args, kwargs, sig.expiry, sig.nonce),
                          sig.signature)
        if signer.lower() != sig.sender.lower():
            raise TaskRefused(f"signed by {signer}, claims {sig.sender} (or another task, queue or arguments)")
        with self._lock:
            self._forget_expired()
            if sig.nonce in self.used:
                raise TaskRefused("replayed: its nonce was used")
        allowed = senders_of(name)
        digest = args_hash(args, kwargs)
        held = next((role for role in sorted(allowed, key=lambda r: r.value)
                     if self._holds(role, signer, name, digest, args)), None)
        if held is None:
            raise TaskRefused(f"{signer} may not send {name} (needs {', '.join(sorted(r.value for r in allowed))})")
        if Role.RESENT in allowed:  # sent (or re-sent) by right: the consumer may send it again
            with self._lock:
                self.used.remember_dispatched(name, digest, int(now) + MAX_TTL_S)
        return sig

    def _holds(self, role: Role, signer: str, name: str, digest: bytes, args: Any) -> bool:
        assert self.roles is not None
        if role is Role.RESENT:
            if signer.lower() != self.roles.own:
                return False
            with self._lock:
                return self.used.was_dispatched(name, digest)
        return self.roles.holds(role, signer, args)

    def mark_used(self, sig: TaskSignature) -> None:
        with self._lock:
            self.used.add(sig.nonce, sig.expiry)

    def sign_reply(self, task_id: str, nonce: bytes, result: Any) -> dict[str, Any]:
        expiry = int(self.clock()) + self.ttl_s
        typed = reply_typed_data(self.domain, task_id, nonce, result, expiry)
        signature = self.account.sign_message(encode_typed_data(full_message=typed)).signature
        return SignedReply(result, self.account.address, expiry, bytes(signature)).to_json()

    def _forget_expired(self) -> None:
        now = self.clock()
        self.used.forget_expired(now)
        for task_id in [t for t, (_, keep_until) in self._sent.items() if keep_until < now]:
            del self._sent[task_id]


def auth_of(app: Any) -> TaskAuth:
    """The app's TaskAuth (built on first use: a provider's key is opened after its app exists)."""
    factory = getattr(app, "unchained_auth", None)
    if factory is None:
        raise TaskRefused(f"Celery app {app.main!r} has no signing key (build it with client.broker.party_celery)")
    auth: TaskAuth = factory()
    return auth


class SigningAMQP(AMQP):
    """Celery's message builder with the sender's signature added to every task it publishes."""

    def _create_task_sender(self) -> Callable[..., Any]:
        send = super()._create_task_sender()
        queues = self.queues

        def signed_send(producer: Any, name: str, message: Any, exchange: Any = None, routing_key: str | None = None,
                        queue: Any = None, **kwargs: Any) -> Any:
            headers, _, body, _ = message
            if routing_key is None and queue is not None:
                routing_key = (queues[queue] if isinstance(queue, str) else queue).routing_key
            args, kw = body[0], body[1]
            if kwargs.get("headers"):  # a retry carries its request's headers, the old signature too
                kwargs["headers"] = {k: v for k, v in kwargs["headers"].items() if k != HEADER}
            headers[HEADER] = auth_of(self.app).sign_task(headers["id"], name, routing_key or "", args, kw,
                                                         headers.get("eta"))
            return send(producer, name, message, exchange=exchange, routing_key=routing_key, queue=queue, **kwargs)

        return signed_send


class SignedTask(Task):
    """Base class of every task: runs only what a party allowed to send it signed, and signs
    what it returns."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = self.request
        if request.called_directly:  # a plain function call in this process: no message to check
            return super().__call__(*args, **kwargs)
        auth = auth_of(self.app)
        if composed := composition_of(request):  # further work, unsigned, to be sent under our key
            log.warning("task %s %s dropped: it names further work (%s), which no party may attach",
                        self.name, request.id, ", ".join(composed))
            raise Reject(f"composed task ({', '.join(composed)})", requeue=False)
        # The queue this worker consumes, not the routing key the message claims: a task signed
        # for another provider's queue and copied into ours must not pass.
        queue = provider_queue(auth.account.address)
        try:
            sig = auth.check_task(self.name, queue, args, kwargs, getattr(request, HEADER, None))
        except TaskRefused as exc:  # an expired one is routine (it waited out a stop), the others are not
            log.log(logging.INFO if isinstance(exc, TaskExpired) else logging.WARNING, "task %s %s on %s dropped: %s",
                    self.name, request.id, queue, exc)
            raise Reject(str(exc), requeue=False) from None
        except Exception as exc:  # the chain did not answer who the sender is: ask again later
            log.warning("task %s %s on %s requeued: its sender could not be checked: %s", self.name, request.id,
                        queue, exc)
            time.sleep(REQUEUE_PAUSE_S)
            raise Reject(str(exc), requeue=True) from None
        try:
            result = super().__call__(*args, **kwargs)
        finally:  # it ran (or raised, or asked for a retry, which is a new message): no second run
            auth.mark_used(sig)
        return auth.sign_reply(request.id, sig.nonce, result)
