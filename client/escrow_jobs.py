"""A job as JobEscrow's calls take it, read back from the escrow's events.

JobEscrow keeps one slot per job (JobState); the Job itself lives in its JobCreated event (every
term) and ResultCommitted event (the result). `read_job` rebuilds it from those logs and checks
it against the slot's hash, so what a caller passes to commit, finalize, refund, cancel, fail,
challenge or slash is exactly what the escrow will accept.
"""

from __future__ import annotations

from dataclasses import dataclass

from web3.contract import Contract

from client.contracts import Struct
from client.errors import ClientError
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
    # The slot first, then the logs: a commit mined between the two reads is then a newer event the
    # loop below passes over, never a slot whose event was not fetched.
    state = escrow.functions.jobState(job_id).call()
    stored = bytes(state.jobHash)
    created = escrow.events.JobCreated().get_logs(argument_filters={"jobId": job_id}, from_block=from_block)
    if not created:
        raise JobNotFound(f"job {job_id} does not exist on escrow {escrow.address} (no JobCreated from block "
                          f"{from_block}: check the job id and --deployment)")
    commits = escrow.events.ResultCommitted().get_logs(argument_filters={"jobId": job_id}, from_block=from_block)
    for event in reversed(created):
        job = EscrowJob.from_created(event["args"])
        candidates = [job] + [job.committed(c["args"]["outputRoot"], c["args"]["itemCount"],
                                            c["args"]["resultDigest"]) for c in reversed(commits)]
        for candidate in candidates:
            if candidate.job_hash() == stored:
                return candidate, state
    raise JobNotFound(f"job {job_id}: no events on escrow {escrow.address} hash to its slot")


@dataclass(frozen=True)
class JobView:
    """A job as a client reads it: the Job (`job`, what calls take) and its slot's state, by the
    Solidity names (`view.challengeWindowEnd`, `view.specHash`)."""

    job: EscrowJob
    status: int
    frozen: bool
    challengeWindowEnd: int  # noqa: N815 (Solidity names, as the contracts' structs read)
    committedAt: int  # noqa: N815
    cancellableAt: int  # noqa: N815 (a Funded job whose renter requested a cancel: when cancel refunds; else 0)

    def __getattr__(self, name: str):
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
    job, state = read_job_and_state(escrow, job_id, from_block)
    window_end = state.endsAt if job.is_committed else 0
    committed_at = window_end - escrow.functions.challengeWindow().call() if window_end else 0
    return JobView(job, state.status, state.frozen, window_end, committed_at, 0 if job.is_committed else state.endsAt)


__all__ = ["JobNotFound", "JobView", "read_job", "read_job_and_state", "read_job_view"]
