"""A bare Celery worker for the renter-latency bench: one unsigned no-op task on its own queue.

Its round trip is the floor any Celery hop has on a broker (no signing, no checks), measured on
the market's broker beside the worker's signed ping (devtools/bench_renter.py). The bench
starts it as `celery -A devtools.bench_ping:app worker` with BENCH_BROKER_URL set.
"""

from __future__ import annotations

import os

from celery import Celery

QUEUE = "bench.bare"
TASK = "bench.bare_ping"

app = Celery("bench-bare", broker=os.environ.get("BENCH_BROKER_URL"), backend=os.environ.get("BENCH_BROKER_URL"))
app.conf.update(task_default_queue=QUEUE, broker_connection_retry_on_startup=True)


@app.task(name=TASK)
def ping() -> str:
    return "pong"
