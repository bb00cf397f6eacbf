"""A job as JobEscrow's calls take it, read back from the escrow's events.

JobEscrow keeps one slot per job (JobState); the Job itself lives in its JobCreated event (every
term) and ResultCommitted event (the result). `read_job` rebuilds it from those logs and checks
it against the slot's hash, so what a caller passes to commit, finalize, refund, cancel, fail,
challenge or slash is exactly what the escrow will accept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from web3.contract import Contract

from client.contracts import BATCH_READS, Struct, ViewCall, read_batched
from client.errors import ClientError
from client.log_follower import EventLayout, get_logs
from protocol.enums import JobStatus
from protocol.escrow_job import EscrowJob


class JobNotFound(ClientError):
    """No such job on this escrow, or its events are not (yet) readable from `from_block`."""


def read_job(escrow: Contract, job_id: int, from_block: int = 0) -> EscrowJob:
    """The job `job_id`, with its result once committed, as its slot's hash vouches for."""
    return read_job_and_state(escrow, job_id, from_block)[0]


def read_job_and_state(escrow: Contract, job_id: int, from_block: int = 0) -> tuple[EscrowJob, Struct]:
    """The job `job_id` and the slot (JobState) it was checked against: read once, so the status
    and times a caller takes from it belong to that job. A node may still serve logs of blocks it
    has since replaced (a reorg, a test's snapshot revert), so the newest events that hash to the
    slot are the job."""
    return read_jobs_and_states(escrow, [job_id], from_block)[job_id]


def read_jobs_and_states(escrow: Contract, job_ids: Iterable[int],
                         from_block: int = 0) -> dict[int, tuple[EscrowJob, Struct]]:
    """read_job_and_state for several jobs in a few round trips whatever their number: their
    slots in JSON-RPC batches, their JobCreated and ResultCommitted events in one log query each
    per BATCH_READS jobs (the job id is an indexed topic)."""
    ids = sorted(set(job_ids))
    slot = ViewCall(escrow, "jobState")
    # The slots first, then the logs: a commit mined between the two reads is then a newer event
    # the match passes over, never a slot whose event was not fetched.
    states = read_batched(escrow.w3, [slot.request(i) for i in ids], [slot.decode] * len(ids))
    created = _events_by_job(escrow, "JobCreated", ids, from_block)
    commits = _events_by_job(escrow, "ResultCommitted", ids, from_block)
    return {i: (_matching(escrow, i, state, created.get(i, []), commits.get(i, []), from_block), state)
            for i, state in zip(ids, states)}


def _events_by_job(escrow: Contract, name: str, ids: list[int], from_block: int) -> dict[int, list[dict[str, Any]]]:
    """The event's arguments (plain: addresses lower-case, bytes 0x-hex) by job id, in chain order."""
    layout = EventLayout(next(item for item in escrow.abi if item.get("type") == "event" and item.get("name") == name))
    found: dict[int, list[dict[str, Any]]] = {}
    for start in range(0, len(ids), BATCH_READS):
        job_topics = ["0x%064x" % job_id for job_id in ids[start:start + BATCH_READS]]
        query = {"address": escrow.address, "topics": [layout.topic, job_topics], "fromBlock": hex(from_block),
                 "toBlock": "latest"}
        for log in get_logs(escrow.w3, query):
            args = layout.args(log["topics"], log["data"])
            found.setdefault(args["jobId"], []).append(args)
    return found


def _matching(escrow: Contract, job_id: int, state: Struct, created: list[dict[str, Any]],
              commits: list[dict[str, Any]], from_block: int) -> EscrowJob:
    stored = bytes(state.jobHash)
    if not created:
        raise JobNotFound(f"job {job_id} does not exist on escrow {escrow.address} (no JobCreated from block "
                          f"{from_block}: check the job id and --deployment)")
    for event in reversed(created):
        job = EscrowJob.from_created(event)
        candidates = [job] + [job.committed(c["outputRoot"], c["itemCount"], c["resultDigest"])
                              for c in reversed(commits)]
        for candidate in candidates:
            if candidate.job_hash() == stored:
                return candidate
    raise JobNotFound(f"job {job_id}: no events on escrow {escrow.address} hash to its slot")


@dataclass(frozen=True)
class JobView:
    """A job as a client reads it, the one shape of a job with its state on every party's side:
    the Job (`job`, what calls take) and its slot's state, by the Solidity names
    (`view.challengeWindowEnd`, `view.specHash`; the Job's own fields also by their Python names,
    `view.spec_hash`)."""

    job: EscrowJob
    status: JobStatus
    frozen: bool
    challengeWindowEnd: int  # noqa: N815 (Solidity names, as the contracts' structs read)
    committedAt: int  # noqa: N815
    cancellableAt: int  # noqa: N815 (a Funded job whose renter requested a cancel: when cancel refunds; else 0)

    def __getattr__(self, name: str) -> Any:
        """The Job's fields by their Solidity names (renter, provider, price, specHash, ...)."""
        solidity = {"specHash": "spec_hash", "outputRoot": "output_root", "itemCount": "item_count",
                    "resultDigest": "result_digest"}
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.job, solidity.get(name, name))


def read_job_view(escrow: Contract, job_id: int, from_block: int = 0) -> JobView:
    """read_job with the slot's status, freeze and times: the slot's endsAt is the challenge window
    end once the job is committed (committedAt = window end - window), the time a requested cancel
    may refund before."""
    return read_job_views(escrow, [job_id], from_block)[job_id]


def read_job_views(escrow: Contract, job_ids: Iterable[int], from_block: int = 0) -> dict[int, JobView]:
    """read_job_view for several jobs, read as read_jobs_and_states reads them."""
    found = read_jobs_and_states(escrow, job_ids, from_block)
    window = escrow.functions.challengeWindow().call() if any(job.is_committed for job, _ in found.values()) else 0
    return {i: view_of(job, state, window) for i, (job, state) in found.items()}


def view_of(job: EscrowJob, state: Struct, window: int) -> JobView:
    """The Job with its slot's state (JobState) under the escrow's challenge `window`: the slot's
    endsAt is the window's end once the job is committed, before that a requested cancel's time."""
    window_end = state.endsAt if job.is_committed else 0
    committed_at = window_end - window if window_end else 0
    return JobView(job, JobStatus(state.status), state.frozen, window_end, committed_at,
                   0 if job.is_committed else state.endsAt)


__all__ = ["JobNotFound", "JobView", "read_job", "read_job_and_state", "read_job_view", "read_job_views",
           "read_jobs_and_states", "view_of"]
