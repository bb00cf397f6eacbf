"""Celery task names and queues: the wire contract between backend, providers and verifiers.

Tasks pass ids and canonical JSON, never objects; every party checks what matters against the
chain. TASK_RUN_JOB carries the job as JobCreated announced it (protocol.escrow_job.EscrowJob's
JSON), so the provider starts fetching and computing at once and reads the chain beside the work,
not before it. Queues: one per provider (`provider.<address>`, lower-case hex), and shared queues
for Proof-of-GPU work, verification and settlement.

Every party talks to the same broker, so how a broker URL is turned into Celery settings lives
here too (`result_backend_url`, `broker_transport_options`): Redis in production, Celery's
SQLAlchemy transport on a SQLite file on one machine without Redis.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from protocol.errors import ProtocolError

QUEUE_POG = "pog"
QUEUE_VERIFY = "verify"
QUEUE_SETTLE = "settle"

# provider_agent consumes these from its own queue
TASK_RUN_JOB = "unchained.provider.run_job"  # (job: EscrowJob.to_json()) -> result summary (signed)
# A TASK_RUN_JOB message header: the job's spec and small inputs by hash (`inline_content`), so the
# provider starts without fetching them. Each item is checked against its name like fetched content
# (what is missing or wrong is fetched), so the header needs no signature; and a worker that does
# not read it runs the job as before.
CONTENT_HEADER = "unchained_content"
MAX_INLINE_CONTENT_BYTES = 256 * 1024  # a dispatch carries the spec and inputs only while they fit in this
# (round_id: int, secret_hex: str) -> commitment message (JSON text). The verifier's secret, handed
# over in the moment it broadcasts fixSeed (its clock already running): with the request block's
# hash it gives the round seed (protocol.pog.pog_round_seed), checked against the round's secretHash.
TASK_POG_ROUND = "unchained.provider.pog_round"
# (round_id: int, randomness_hex: str, k: int) -> answers (JSON text) to the verifier's revealed secret
TASK_POG_ANSWER = "unchained.provider.pog_answer"
# (round_id: int, shapes: [[lanes, steps, iterations], ...] one per GPU) -> fill roots (JSON
# text): every device builds its residency fill at once (protocol/pog/residency.py)
TASK_POG_FILL = "unchained.provider.pog_fill"
# (round_id: int, randomness_hex: str, q: int) -> probe answers (JSON text), every device at once
TASK_POG_PROBE = "unchained.provider.pog_probe"
TASK_LEASE = "unchained.provider.lease"  # (lease_id: int) -> hand over / release GPUs

# verifier consumes these
TASK_VERIFY_JOB = "unchained.verifier.verify_job"  # (job_id: int)
TASK_SCHEDULE_POG = "unchained.verifier.schedule_pog"  # (provider: str)

# settlement (anyone may run it: finalize is permissionless)
TASK_FINALIZE_JOB = "unchained.settle.finalize_job"  # (job_id: int)

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_REDIS_PREFIXES = ("redis://", "rediss://")
_SQLITE_PREFIX = "sqla+sqlite:///"


class BadAddress(ProtocolError):
    """Not a 20-byte hex address."""


class BadDispatch(ProtocolError):
    """A TASK_RUN_JOB message's inline content that is not content hash -> base64 within bounds.

    The job itself is an EscrowJob, sent by the operator, who is trusted for availability only: a
    provider works from it at once but releases nothing (no signed result, no outputs) until the
    chain shows the same job funded and addressed to it."""


_HEX32 = re.compile(r"^0x[0-9a-fA-F]{64}$")


def inline_content(items: Mapping[str, bytes]) -> dict[str, str]:
    """CONTENT_HEADER's value: content hash -> base64 of the bytes (the caller keeps the total
    within MAX_INLINE_CONTENT_BYTES)."""
    return {name: base64.b64encode(data).decode() for name, data in items.items()}


def read_inline_content(doc: Any) -> dict[str, bytes]:
    """The bytes of CONTENT_HEADER's value by name (None: nothing inline). The names are not
    checked against the bytes here: the receiver does that as for any fetched content."""
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise BadDispatch(f"content: expected a JSON object, got {type(doc).__name__}")
    items, total = {}, 0
    for name, data in doc.items():
        if not isinstance(name, str) or not _HEX32.match(name) or not isinstance(data, str):
            raise BadDispatch(f"content: expected content hash -> base64, got {name!r}")
        try:
            items[name.lower()] = base64.b64decode(data, validate=True)
        except ValueError:
            raise BadDispatch(f"content {name}: not base64") from None
        total += len(items[name.lower()])
        if total > MAX_INLINE_CONTENT_BYTES:
            raise BadDispatch(f"content: more than {MAX_INLINE_CONTENT_BYTES} bytes inline")
    return items


class BadBrokerUrl(ProtocolError):
    """A broker URL this project cannot configure Celery for."""


def provider_queue(address: str) -> str:
    """The queue a provider consumes: `provider.<lower-case address>`."""
    if not _ADDRESS.match(address):
        raise BadAddress(f"not an address: {address!r}")
    return f"provider.{address.lower()}"


def _sqlite_broker_path(broker_url: str) -> PurePosixPath | None:
    """The database file of a `sqla+sqlite:///<path>` broker; None for any other broker."""
    if not broker_url.startswith(_SQLITE_PREFIX):
        return None
    path = broker_url[len(_SQLITE_PREFIX):]
    # An in-memory database is private to one process, and query options would be lost below.
    if not path or "?" in path:
        raise BadBrokerUrl(f"a SQLite broker needs a plain file path: {broker_url!r}")
    return PurePosixPath(path)


def _check_host(url: str) -> None:
    """A network URL's host and port must parse (`redis://[bad` would fail deep inside Celery)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  raises ValueError on a malformed port
    except ValueError as exc:
        raise BadBrokerUrl(f"malformed broker URL {url!r}: {exc}") from None
    if not parts.hostname and not parts.path.strip("/").isdigit() and parts.netloc:
        raise BadBrokerUrl(f"malformed broker URL {url!r}: no host")


def result_backend_url(broker_url: str) -> str:
    """Where task results go for a broker: Redis keeps them in the same database; a SQLite broker
    keeps them in a file of their own next to the broker's (`broker.sqlite` ->
    `broker-results.sqlite`), so that result writes do not contend with the transport's polls
    for the broker file's lock."""
    if broker_url.startswith(_REDIS_PREFIXES):
        _check_host(broker_url)
        return broker_url
    path = _sqlite_broker_path(broker_url)
    if path is None:
        raise BadBrokerUrl(f"not a Redis or sqla+sqlite:/// broker: {broker_url!r}")
    return f"db+sqlite:///{path.with_name(f'{path.stem}-results{path.suffix}')}"


def broker_transport_options(broker_url: str, *, visibility_timeout_s: int | None = None,
                             max_retries: int | None = None) -> dict[str, Any]:
    """Celery's `broker_transport_options` for a broker, keeping only what its transport accepts.

    `max_retries` is kombu's connection retry policy, which every transport takes (the SQLAlchemy
    one strips it before building its engine). `visibility_timeout_s` exists only on Redis: the
    SQLAlchemy transport passes every other option to `sqlalchemy.create_engine`, which refuses
    unknown ones, and it never hands a dead worker's unacknowledged message to another worker.
    For the same reason its polling interval cannot be lowered from kombu's 1 s: the transport
    reads `polling_interval` from the same options, so a task waits up to 1 s to be picked up.
    """
    is_redis = broker_url.startswith(_REDIS_PREFIXES)
    if not is_redis and _sqlite_broker_path(broker_url) is None:
        raise BadBrokerUrl(f"not a Redis or sqla+sqlite:/// broker: {broker_url!r}")
    options: dict[str, Any] = {}
    if max_retries is not None:
        options["max_retries"] = max_retries
    if is_redis and visibility_timeout_s is not None:
        options["visibility_timeout"] = visibility_timeout_s
    return options
