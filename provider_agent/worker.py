"""The provider's Celery worker: consumes `provider.<address>` (protocol.tasks names).

Tasks are thin: they pass ids (a job: the job as dispatched, protocol.escrow_job.EscrowJob; its
spec and small inputs may ride in the message's CONTENT_HEADER, and go into the content cache
only if they hash to their names), build
the agent once per process (`get_agent`) and let `JobService` decide from the local record and
the chain what is left to do, so a redelivered message never does work twice. A job payload that
does not parse fails its task at once with the reason (the message is dropped, not retried).
The agent's committer thread (provider_agent.committer) starts with the worker: it commits
signed results and finalizes in batches, and picks up at start what a stopped worker signed. Messages are acknowledged late (after the task returns) and
rejected back to the queue when the worker dies, so a killed worker loses nothing; Redis hands
an unacknowledged message to the next worker after the visibility timeout. Transient failures
(RPC or backend unreachable, the job held by another live process) are retried with
exponential backoff.

Redis gives an unacknowledged message back only after the visibility timeout (and its restore
sweep runs rarely), so on start the worker also re-enqueues every job its local record shows as
started by a process that is gone: a killed job resumes at once, and the late redelivery of the
original message finds the job committed and does nothing.

On the embedded SQLite broker (Celery's SQLAlchemy transport) there is no visibility timeout:
a message a killed worker had taken is never handed out again, and the start-up re-enqueue
above is what resumes its job.

Deliveries to the backend (the signed result, then the outputs) that failed after signing
(`JobOutcome.uploaded` false) get a task of their own, `upload_outputs`, retried with a doubling
countdown (Celery's own, no sleep inside a task) while the backend cannot take them (unreachable,
or behind the chain); an upload the backend refuses outright fails its task (with
the reason in the log). On start the worker also enqueues one for every signed or committed job
whose outputs the backend does not hold yet.

Run with `unchained provider run` or `celery -A provider_agent.worker:app worker -Q provider.<address>`.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import requests
from celery import Task
from celery.signals import worker_ready, worker_shutdown
from celery.utils.time import get_exponential_backoff_interval

from client.backend_http import BackendUnavailable
from client.broker import celery_settings, signed_celery
from client.errors import NodeUnavailable
from protocol.broker import provider_keyprefix
from protocol.escrow_job import EscrowJob, EscrowJobError
from protocol.ids import ChallengeId
from protocol.tasks import (
    CONTENT_HEADER,
    TASK_LEASE,
    TASK_POG_ANSWER,
    TASK_POG_FILL,
    TASK_POG_PROBE,
    TASK_POG_ROUND,
    TASK_RUN_JOB,
    BadDispatch,
    provider_queue,
    read_inline_content,
)
from provider_agent.agent import built_agent, get_agent
from provider_agent.cache import ContentUnavailable
from provider_agent.jobs import UploadFailed
from provider_agent.leases import LeaseKeyMissing
from provider_agent.settings import Settings
from provider_agent.state import JobBusy

logger = logging.getLogger(__name__)

# Provider-internal tasks (on the provider's own queue); not part of protocol.tasks.
TASK_ANSWER_CHALLENGE = "unchained.provider.answer_challenge"  # (challenge_id: int)
TASK_POG_COMMIT = "unchained.provider.pog_commit"  # (round_id: int) -> tx hash
TASK_REFUND_FAILED = "unchained.provider.refund_failed"  # () -> refunded job ids
TASK_PING = "unchained.provider.ping"  # () -> "pong": liveness, and the raw round trip benchmark
TASK_UPLOAD_OUTPUTS = "unchained.provider.upload_outputs"  # (job_id: int) -> items sent

TRANSIENT = (JobBusy, requests.exceptions.ConnectionError, requests.exceptions.Timeout, httpx.TransportError,
             ContentUnavailable, BackendUnavailable, NodeUnavailable)
UPLOAD_MAX_RETRIES = 16  # from 0.5 s doubling to 300 s: about 40 minutes in all
LEASE_KEY_RETRIES = 600  # one a second: longer than LeaseManager.DELIVERY_WINDOW


def celery_config(settings: Settings, address: str) -> dict[str, Any]:
    """The worker's settings: its queue, bookkeeping and replies under its own key prefix
    (protocol.broker), which its broker user (`unchained broker grant --provider`) is limited to."""
    return {
        **celery_settings(settings.broker_url, provider_keyprefix(address),
                          visibility_timeout_s=settings.visibility_timeout_s),
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "result_expires": 24 * 3600,
        "broker_connection_retry_on_startup": True,
    }


# Every task is checked (sender's signature and role on the chain) and its reply signed with the
# agent's key: client.task_auth.
app = signed_celery("unchained_provider", lambda: get_agent().task_auth)
# Evaluated when the configuration is first read, not at import: settings and the key stay lazy.
app.add_defaults(lambda: celery_config(get_agent().settings, get_agent().chain.address))

@worker_shutdown.connect
def _commit_before_exit(**_: Any) -> None:
    """A warm shutdown (SIGTERM, Ctrl-C) commits what is signed before the process ends."""
    agent = built_agent()
    if agent is not None and agent.lease_watcher is not None:
        agent.lease_watcher.stop()
    if agent is not None and agent.committer is not None:
        agent.committer.stop()


@worker_ready.connect
def _resume_orphaned_jobs(**_: Any) -> None:
    agent = get_agent()
    assert agent.committer is not None
    agent.committer.start()
    if agent.lease_watcher is not None:  # ends our leases on-chain once they run out
        agent.lease_watcher.start()
    for job_id in agent.jobs.store.orphaned():
        record = agent.jobs.store.get(job_id)
        job = record.dispatched() if record is not None else None
        if job is None:  # kept by an agent before dispatches carried the job: its redelivery resumes it
            logger.warning("job %s: started by a process that is gone, but its dispatch is not kept", job_id)
            continue
        logger.info("job %s: started by a process that is gone; re-enqueued", job_id)
        run_job.apply_async((job.to_json(),), queue=provider_queue(agent.chain.address))
    for job_id in agent.jobs.pending_uploads():
        logger.info("job %s: outputs not uploaded yet; upload re-enqueued", job_id)
        upload_outputs.apply_async((job_id,), queue=provider_queue(agent.chain.address))
    # Lease environments outlive the worker (renters keep their sessions across a restart); each
    # is looked at again, so one whose lease ended meanwhile is torn down now.
    for lease_id in agent.leases.envs.lease_ids() if agent.leases is not None else []:
        logger.info("lease %s: environment found at start; checked against the chain", lease_id)
        lease.apply_async((lease_id,), queue=provider_queue(agent.chain.address))


_retrying = {"autoretry_for": TRANSIENT, "retry_backoff": 2, "retry_backoff_max": 120, "max_retries": 8,
             "retry_jitter": True}


# Tasks are bound to this app only (shared=False): a shared task would also be registered in every
# Celery app the process builds later (a verifier's link, a test's sender) and run there.
@app.task(shared=False, name=TASK_PING)
def ping() -> str:
    return "pong"


@app.task(shared=False, name=TASK_RUN_JOB, bind=True, acks_late=True, **_retrying)
def run_job(self: Task, job: Any) -> dict[str, Any]:
    agent = get_agent()
    try:
        dispatched = EscrowJob.from_json(job)
        inline = read_inline_content(getattr(self.request, CONTENT_HEADER, None))
    except (EscrowJobError, BadDispatch) as exc:  # not retried: the same bytes would fail again
        logger.error("run_job: bad job payload dropped (delivery %s): %s", self.request.id, exc)
        raise
    if refused := agent.jobs.cache.seed(inline):  # the operator's mistake or worse: fetched instead
        logger.warning("job %s: content sent with the dispatch does not match its names, fetched instead: %s",
                       dispatched.id, ", ".join(refused))
    outcome = agent.jobs.process(dispatched)
    logger.info("job %s: %s (delivery %s, retry %s)", dispatched.id, outcome.status, self.request.id,
                self.request.retries)
    if outcome.uploaded is False:  # signed, but the backend does not hold the result and outputs yet
        upload_outputs.apply_async((outcome.job_id,), countdown=agent.settings.upload_backoff_s,
                                   queue=provider_queue(agent.chain.address))
    return outcome.to_json()


@app.task(shared=False, name=TASK_UPLOAD_OUTPUTS, bind=True, acks_late=True, max_retries=UPLOAD_MAX_RETRIES)
def upload_outputs(self: Task, job_id: int) -> int:
    """One more try at a signed job's result and output upload; on failure, again after a doubling
    countdown (from upload_backoff_s, at most upload_retry_s). After the last retry the upload
    stays pending until the worker's next start."""
    agent = get_agent()
    try:
        return agent.jobs.upload_outputs(int(job_id))
    except UploadFailed as exc:
        countdown = get_exponential_backoff_interval(agent.settings.upload_backoff_s, self.request.retries,
                                                     agent.settings.upload_retry_s)
        logger.warning("%s; retry %d/%d in %.1f s", exc, self.request.retries + 1, UPLOAD_MAX_RETRIES, countdown)
        raise self.retry(exc=exc, countdown=countdown) from exc


@app.task(shared=False, name=TASK_ANSWER_CHALLENGE, bind=True, acks_late=True, **_retrying)
def answer_challenge(self: Task, challenge_id: int) -> str:
    return get_agent().answer_challenge(ChallengeId(int(challenge_id)))


@app.task(shared=False, name=TASK_REFUND_FAILED, bind=True, acks_late=True, **_retrying)
def refund_failed(self: Task) -> list[int]:
    return get_agent().jobs.refund_failed()


@app.task(shared=False, name=TASK_POG_ROUND, bind=True, acks_late=True, **_retrying)
def pog_round(self: Task, round_id: int, secret_hex: str) -> str:
    """Computes the round from the verifier's secret and replies with the roots at once; the
    on-chain commit follows as a task of its own, so the verifier times the GPU, not a block
    confirmation."""
    agent = get_agent()
    message = agent.pog.compute(int(round_id), str(secret_hex))
    pog_commit.apply_async((round_id,), queue=provider_queue(agent.chain.address))
    return message


@app.task(shared=False, name=TASK_POG_COMMIT, bind=True, acks_late=True, **_retrying)
def pog_commit(self: Task, round_id: int) -> str:
    return get_agent().pog.commit_onchain(int(round_id))


@app.task(shared=False, name=TASK_POG_ANSWER, bind=True, acks_late=True, **_retrying)
def pog_answer(self: Task, round_id: int, randomness_hex: str, k: int) -> str:
    return get_agent().pog.answer(int(round_id), str(randomness_hex), int(k))


@app.task(shared=False, name=TASK_POG_FILL, bind=True, acks_late=True, **_retrying)
def pog_fill(self: Task, round_id: int, shapes: list[list[int]]) -> str:
    return get_agent().pog.fill(int(round_id), shapes)


@app.task(shared=False, name=TASK_POG_PROBE, bind=True, acks_late=True)
def pog_probe(self: Task, round_id: int, randomness_hex: str, q: int) -> str:
    """Not retried: an answer after the verifier's deadline counts for nothing."""
    return get_agent().pog.probe(int(round_id), str(randomness_hex), int(q))


@app.task(shared=False, name=TASK_LEASE, bind=True, acks_late=True, **{**_retrying, "max_retries": LEASE_KEY_RETRIES})
def lease(self: Task, lease_id: int) -> str:
    """Hands the lease's machine to its renter (the miner yields) and looks again at its end;
    takes it back when the lease ended. A renter key not bound yet is asked for every second
    (the delivery window bounds the wait)."""
    agent = get_agent()
    try:
        step = agent.leases.handle(int(lease_id))
    except LeaseKeyMissing as exc:
        logger.info("%s; asking again in 1 s", exc)
        raise self.retry(exc=exc, countdown=1) from exc
    if step.check_again_in_s is not None:
        self.apply_async((lease_id,), countdown=step.check_again_in_s,
                         queue=self.request.delivery_info.get("routing_key"))
    logger.info("lease %s: %s", lease_id, step.outcome)
    return step.outcome
