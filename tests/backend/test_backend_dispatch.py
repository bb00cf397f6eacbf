"""Funded jobs reach their provider's Celery queue on a real Redis, once, after confirmation."""

from __future__ import annotations

import base64
import json
import statistics
import time


import backend_support as support
import pytest
import redis

from backend.runtime import Backend
from client.contracts import emitted
from client.escrow_jobs import read_job
from protocol.merkle import keccak256
from protocol.broker import provider_keyprefix
from protocol.task_auth import HEADER
from backend import models as m
from backend.auth import utcnow
from backend.jobs import store_spec
from protocol.escrow_job import EscrowJob
from protocol.jobs import JobSpec
from protocol.tasks import (CONTENT_HEADER, MAX_INLINE_CONTENT_BYTES, TASK_LEASE, TASK_RUN_JOB,
                            provider_queue, read_inline_content)
from devtools.market import wait_for


def _messages(client: redis.Redis, queue: str) -> list[dict]:  # type: ignore[type-arg]
    """The messages on a provider's queue, which lies under its key prefix (protocol.broker)."""
    return [json.loads(raw) for raw in client.lrange(provider_keyprefix(queue.removeprefix("provider.")) + queue, 0, -1)]


def test_confirmed_job_is_enqueued_once_on_the_provider_queue(chain, session, market, tmp_path, redis_url, dispatch_key) -> None:  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path, dispatch=True, broker_url=redis_url, confirmations=2,
                                     **dispatch_key)
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
        assert message["headers"][HEADER]["sender"] == support.anvil_key(0).address  # signed with the dispatch key
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        # The job as JobCreated announced it: the provider starts without reading the chain first.
        [payload] = args
        created = read_job(session.contract("JobEscrow"), job_id)
        assert EscrowJob.from_json(payload) == EscrowJob(
            job_id, market.renter, market.provider, "0x" + "00" * 20, 10**15, keccak256(b"dispatch"),
            created.deadline)
        assert payload["price"] == str(10**15)  # decimal string: JSON numbers lose wei above 2^53
        # Re-reading the same blocks (a restart without the cursor) dispatches nothing again.
        backend.dispatcher.dispatch(EscrowJob.from_json(payload))
        assert len(_messages(broker, queue)) == before + 1
        assert all(m["headers"]["id"] != f"run-job-{job_id}"
                   for m in _messages(broker, provider_queue(market.provider2)))
    finally:
        backend.close()


def test_a_dispatch_carries_the_spec_and_the_renters_inputs_that_fit(chain, session, market, tmp_path, redis_url,
                                                                     dispatch_key) -> None:  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path, dispatch=True, broker_url=redis_url, confirmations=0,
                                     **dispatch_key)
    backend = Backend.open(settings)
    try:
        indexer = backend.make_indexer()
        indexer.sync()
        small, foreign, large = b"renter's input", b"someone else's input", bytes(MAX_INLINE_CONTENT_BYTES)
        held = {}
        with backend.factory() as db:
            for data, owner in ((small, market.renter), (foreign, market.provider2), (large, market.renter)):
                held[data] = backend.blobs.put(data)
                db.add(m.Blob(content_hash=held[data], owner=owner.lower(), size=len(data), created_at=utcnow()))
                db.add(m.BlobHolder(content_hash=held[data], account=owner.lower()))
            db.commit()
            spec = JobSpec(model="0x" + "11" * 32, model_format="torchscript",
                           inputs=(held[small], held[foreign], held[small], held[large]), batch_size=1,
                           tolerance_ppm=0, deadline=2**40, price_wei=10**15, provider=market.provider.lower())
            store_spec(db, spec.canonical())
        job_id = support.funded_job(session, market.renter, market.provider, spec.spec_hash, 10**15)
        indexer.sync()
        [message] = [msg for msg in _messages(redis.Redis.from_url(redis_url), provider_queue(market.provider))
                     if msg["headers"]["id"] == f"run-job-{job_id}"]
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        [payload] = args  # the content rides in a header: a worker that does not read it runs the job as before
        content = message["headers"][CONTENT_HEADER]
        assert EscrowJob.from_json(payload).id == job_id
        # The spec and the renter's own input; not another account's input (the renter named it but
        # never uploaded it) and not what would go past the size limit: the provider fetches those.
        assert read_inline_content(content) == {"0x" + spec.spec_hash.hex(): spec.canonical(), held[small]: small}
    finally:
        backend.close()


def test_dispatch_survives_a_broker_outage(chain, session, market, tmp_path, redis_url, dispatch_key) -> None:  # type: ignore[no-untyped-def]
    dead = "redis://127.0.0.1:1/0"
    settings = support.make_settings(chain, tmp_path, dispatch=True, broker_url=dead, confirmations=0,
                                     **dispatch_key)
    backend = Backend.open(settings)
    try:
        indexer = backend.make_indexer()
        indexer.sync()  # nothing reaches a dead broker, but the rows remember what is owed
        job_id = support.funded_job(session, market.renter, market.provider, keccak256(b"outage"), 10**15)
        indexer.sync()
        from backend.dispatch import make_celery

        backend.dispatcher.celery = make_celery(redis_url, backend.task_auth)
        sent = backend.dispatcher.retry_pending()
        assert sent >= 1
        queue = provider_queue(market.provider)
        sent_jobs = {m["headers"]["id"]: json.loads(base64.b64decode(m["body"]))[0][0]
                     for m in _messages(redis.Redis.from_url(redis_url), queue)}
        assert sent_jobs[f"run-job-{job_id}"]["jobId"] == job_id  # the job, rebuilt from its indexed row
        assert sent_jobs[f"run-job-{job_id}"]["specHash"] == "0x" + keccak256(b"outage").hex()
    finally:
        backend.close()


def test_lease_start_and_end_are_told_to_the_provider(chain, session, market, tmp_path, redis_url, dispatch_key) -> None:  # type: ignore[no-untyped-def]
    settings = support.make_settings(chain, tmp_path, dispatch=True, broker_url=redis_url, confirmations=0,
                                     **dispatch_key)
    backend = Backend.open(settings)
    try:
        indexer = backend.make_indexer()
        indexer.sync()
        broker = redis.Redis.from_url(redis_url)
        queue = provider_queue(market.provider)
        leases = session.contract("LeaseManager")
        cost = leases.functions.leaseCost(market.provider, 1, 3600).call()
        receipt = session.send(leases.functions.startLease(market.provider, 1, 3600), market.renter, value=cost)
        lease_id = emitted(leases, "LeaseStarted", receipt)[0]["args"]["leaseId"]
        indexer.sync()
        session.send(leases.functions.endLease(lease_id), market.renter)
        indexer.sync()
        told = [m for m in _messages(broker, queue) if m["headers"]["task"] == TASK_LEASE]
        assert [json.loads(base64.b64decode(m["body"]))[0] for m in told[:2]] == [[lease_id], [lease_id]]
    finally:
        backend.close()


@pytest.mark.parametrize("push", ["off", "new-heads"])
def test_funded_jobs_are_dispatched_as_their_blocks_arrive(chain, session, market, tmp_path, redis_url, push,
                                                          dispatch_key) -> None:  # type: ignore[no-untyped-def]
    """The live indexer thread (default poll of 1 s), with and without blocks pushed over the
    node's WebSocket: every funded job reaches its queue once; the funding -> dispatch latency
    of each is printed (measured, not asserted)."""
    settings = support.make_settings(chain, tmp_path, dispatch=True, broker_url=redis_url, confirmations=0,
                                     run_indexer=True, ws_url="off" if push == "off" else "", **dispatch_key)
    backend = Backend.open(settings)
    broker = redis.Redis.from_url(redis_url)
    queue = provider_queue(market.provider)
    try:
        backend.start_indexer()
        assert wait_for(lambda: backend.indexer is not None and backend.indexer.cursor() >= session.web3.eth.block_number,
                        timeout=30, interval=0.01)
        if push != "off":
            assert wait_for(lambda: backend.heads is not None and backend.heads.connected.is_set(), timeout=10,
                            interval=0.01)
        latencies, mine = [], []
        for n in range(5):
            job_id = support.funded_job(session, market.renter, market.provider, keccak256(b"latency%d" % n), 10**15)
            funded_at = time.monotonic()  # the receipt is in: the job is funded
            task_id = f"run-job-{job_id}"
            mine.append(task_id)
            assert wait_for(lambda: any(m["headers"]["id"] == task_id for m in _messages(broker, queue)),
                            timeout=10, interval=0.002)
            latencies.append(time.monotonic() - funded_at)
        ids = [m["headers"]["id"] for m in _messages(broker, queue)]
        assert all(ids.count(task_id) == 1 for task_id in mine)  # each job once
        print(f"\nfunding -> dispatch ({push}, poll {settings.index_poll_seconds} s): "
              f"median {statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms")
    finally:
        backend.close()
