"""The embedded broker (Celery's SQLAlchemy transport on a SQLite file) end to end: a provider
worker process consumes its queue, the verifier's Celery client gets its ping answered through
the result store, and a job the backend's Dispatcher sends is run and its result read back."""

from __future__ import annotations

from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

from backend import models as m
from backend.dispatch import Dispatcher, make_celery as backend_celery
from protocol.tasks import provider_queue
from provider_agent.agent import Agent
from provider_agent.chain import JobStatus
from provider_agent.worker import TASK_PING
from tests.provider_agent.conftest import save_torchscript
from tests.provider_agent.test_worker import ITEMS, Worker
from tests.tiny_models import Tiny
from verifier.links import CeleryProverLink, make_celery as verifier_celery


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
    try:
        verifier = verifier_celery(broker_url)
        CeleryProverLink(verifier, market.provider).ready()
        assert verifier.send_task(TASK_PING, queue=queue).get(timeout=20) == "pong", log.read_text()

        engine = create_engine(f"sqlite:///{tmp_path / 'backend.sqlite'}")
        m.Base.metadata.create_all(engine)
        dispatcher = Dispatcher(backend_celery(broker_url), sessionmaker(engine))
        task_id = dispatcher.dispatch(job_id, market.provider)
        assert task_id == f"run-job-{job_id}"
        # The verifier's client reads the provider's result from the same store.
        assert verifier.AsyncResult(task_id).get(timeout=30)["status"] == "committed", log.read_text()
    finally:
        worker.stop()
    assert agent.chain.job(job_id).status == JobStatus.COMMITTED
    # Results live in a file of their own, next to the broker's.
    assert (tmp_path / "broker-results.sqlite").exists()
