"""The embedded broker (Celery's SQLAlchemy transport on a SQLite file) end to end: a provider
worker process consumes its queue, the verifier's Celery client gets its ping answered through
the result store, and a job the backend's Dispatcher sends is run and its result read back."""

from __future__ import annotations

import numpy as np
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

from backend import models as m
from backend.dispatch import Dispatcher, make_celery as backend_celery
from protocol.enums import JobStatus
from protocol.tasks import provider_queue
from provider_agent.agent import Agent
from provider_agent.worker import TASK_PING
from client.task_auth import TaskAuth, domain_of
from protocol.task_auth import SignedReply
from tests.support.accounts import dev_account
from tests.support.broker import signed_result, signed_sender
from tests.support.models import save_torchscript
from tests.support.waiting import wait_until
from tests.support.worker import Worker
from tests.tiny_models import Tiny
from verifier.links import CeleryProverLink, make_celery as verifier_celery

ITEMS = [np.random.default_rng(i).standard_normal(8).astype(np.float32) for i in range(8)]


def test_sqlite_broker_carries_pings_and_dispatched_jobs(settings_for, market, tmp_path) -> None:
    broker_url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}"
    settings = settings_for(broker_url=broker_url)
    agent = Agent.build(settings)
    agent.register()
    content = settings.content_dir
    job_id, _ = market.create_job(content, save_torchscript(Tiny(), content), ITEMS)
    queue = provider_queue(market.provider)
    log = tmp_path / "worker.log"
    worker = Worker(settings, queue, log)
    domain = domain_of(market.session.deployment)
    try:
        # The verifier's link reaches the broker; a ping may come from the provider itself only.
        CeleryProverLink(verifier_celery(broker_url, lambda: TaskAuth(domain, dev_account(4))), market.provider).ready()
        own = signed_sender(broker_url, market, 1)
        ping = own.for_provider(market.provider).send_task(TASK_PING, queue=queue)
        assert signed_result(own, market.provider, ping, 20) == "pong", log.read_text()

        engine = create_engine(f"sqlite:///{tmp_path / 'backend.sqlite'}")
        m.Base.metadata.create_all(engine)
        dispatcher = Dispatcher(backend_celery(broker_url, lambda: TaskAuth(domain, dev_account(0))),
                                sessionmaker(engine))
        task_id = dispatcher.dispatch(market.dispatched(job_id))
        assert task_id == f"run-job-{job_id}"
        # Another client reads the provider's (signed) result from the same store.
        reply = own.for_provider(market.provider).AsyncResult(task_id).get(timeout=30)
        assert SignedReply.from_json(reply).result["status"] == "signed", log.read_text()
        # The worker's committer thread puts it on-chain behind the reply.
        wait_until(lambda: agent.chain.job(job_id).status == JobStatus.COMMITTED, 30, "the committer committed")
    finally:
        worker.stop()
    # Results live in a file of their own, next to the broker's.
    assert (tmp_path / "broker-results.sqlite").exists()
