"""Celery task names and queues: the wire contract between backend, providers and verifiers.

Tasks pass ids and canonical JSON, never objects; every party re-reads what matters from the
chain. Queues: one per provider (`provider.<address>`, lower-case hex), and shared queues for
Proof-of-GPU work, verification and settlement.
"""

from __future__ import annotations

import re

QUEUE_POG = "pog"
QUEUE_VERIFY = "verify"
QUEUE_SETTLE = "settle"

# provider_agent consumes these from its own queue
TASK_RUN_JOB = "unchained.provider.run_job"  # (job_id: int) -> result summary (signed)
TASK_POG_ROUND = "unchained.provider.pog_round"  # (round_id: int) -> commitment message (JSON text)
# (round_id: int, randomness_hex: str, k: int) -> answers (JSON text) to the verifier's revealed secret
TASK_POG_ANSWER = "unchained.provider.pog_answer"
TASK_LEASE = "unchained.provider.lease"  # (lease_id: int) -> hand over / release GPUs

# verifier consumes these
TASK_VERIFY_JOB = "unchained.verifier.verify_job"  # (job_id: int)
TASK_SCHEDULE_POG = "unchained.verifier.schedule_pog"  # (provider: str)

# settlement (anyone may run it: finalize is permissionless)
TASK_FINALIZE_JOB = "unchained.settle.finalize_job"  # (job_id: int)

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


class BadAddress(ValueError):
    """Not a 20-byte hex address."""


def provider_queue(address: str) -> str:
    """The queue a provider consumes: `provider.<lower-case address>`."""
    if not _ADDRESS.match(address):
        raise BadAddress(f"not an address: {address!r}")
    return f"provider.{address.lower()}"
