"""Funded jobs reach their provider's Celery queue on a real Redis, once, after confirmation."""

from __future__ import annotations

import base64
import json

import backend_support as support
import redis

from backend.runtime import Backend
from protocol.merkle import keccak256
from protocol.tasks import TASK_LEASE, TASK_RUN_JOB, provider_queue


def _messages(client: redis.Redis, queue: str) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(raw) for raw in client.lrange(queue, 0, -1)]


def test_confirmed_job_is_enqueued_once_on_the_provider_queue(chain, session, market, tmp_path, redis_url) -> None:  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path, dispatch=True, broker_url=redis_url, confirmations=2)
    backend = Backend.open(settings)
    try:
        indexer = backend.make_indexer()
        indexer.sync()  # the market's jobs so far
        broker = redis.Redis.from_url(redis_url)
        queue = provider_queue(market.provider)
        before = len(_messages(broker, queue))
        job_id = support.funded_job(session, market.renter, market.provider, keccak256(b"dispatch"), 10**15)
        indexer.sync()
        assert len(_messages(broker, queue)) == before, "dispatched before the confirmation depth"
        session.mine(2)
        indexer.sync()
        messages = _messages(broker, queue)
        assert len(messages) == before + 1
        message = messages[0]  # LPUSH: newest first
        assert message["headers"]["task"] == TASK_RUN_JOB and message["headers"]["id"] == f"run-job-{job_id}"
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        assert args == [job_id]
        # Re-reading the same blocks (a restart without the cursor) dispatches nothing again.
        backend.dispatcher.dispatch(job_id, market.provider)
        assert len(_messages(broker, queue)) == before + 1
        assert all(m["headers"]["id"] != f"run-job-{job_id}"
                   for m in _messages(broker, provider_queue(market.provider2)))
    finally:
        backend.close()


def test_dispatch_survives_a_broker_outage(chain, session, market, tmp_path, redis_url) -> None:  # type: ignore[no-untyped-def]
    dead = "redis://127.0.0.1:1/0"
    settings = support.make_settings(chain, tmp_path, dispatch=True, broker_url=dead, confirmations=0)
    backend = Backend.open(settings)
    try:
        indexer = backend.make_indexer()
        indexer.sync()  # nothing reaches a dead broker, but the rows remember what is owed
        job_id = support.funded_job(session, market.renter, market.provider2, keccak256(b"outage"), 10**15)
        indexer.sync()
        from backend.dispatch import make_celery

        backend.dispatcher.celery = make_celery(redis_url)
        sent = backend.dispatcher.retry_pending()
        assert sent >= 1
        queue = provider_queue(market.provider2)
        ids = [m["headers"]["id"] for m in _messages(redis.Redis.from_url(redis_url), queue)]
        assert f"run-job-{job_id}" in ids
    finally:
        backend.close()


def test_lease_start_and_end_are_told_to_the_provider(chain, session, market, tmp_path, redis_url) -> None:  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path, dispatch=True, broker_url=redis_url, confirmations=0)
    backend = Backend.open(settings)
    try:
        indexer = backend.make_indexer()
        indexer.sync()
        broker = redis.Redis.from_url(redis_url)
        queue = provider_queue(market.provider)
        leases = session.contract("LeaseManager")
        cost = leases.functions.leaseCost(market.provider, 1, 3600).call()
        receipt = session.send(leases.functions.startLease(market.provider, 1, 3600), market.renter, value=cost)
        lease_id = leases.events.LeaseStarted().process_receipt(receipt)[0]["args"]["leaseId"]
        indexer.sync()
        session.send(leases.functions.endLease(lease_id), market.renter)
        indexer.sync()
        told = [m for m in _messages(broker, queue) if m["headers"]["task"] == TASK_LEASE]
        assert [json.loads(base64.b64decode(m["body"]))[0] for m in told[:2]] == [[lease_id], [lease_id]]
    finally:
        backend.close()
