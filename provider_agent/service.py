"""The provider's run loop: mining, the metrics server, the heartbeat and the Celery worker on this
provider's queue, until the worker stops (`unchained provider run` builds the agent and calls
`run`)."""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from celery.exceptions import SecurityWarning

from protocol.tasks import provider_queue
from provider_agent import ProviderAgentError
from provider_agent.agent import Agent

if TYPE_CHECKING:
    from provider_agent.metrics import MetricsServer


def heartbeat(agent: Agent, stop: threading.Event, say: Callable[[str], object]) -> None:
    """Beats until `stop` is set. Challenges must be answered before their deadlines; refunds for
    failed jobs fall due at their deadlines (commits and payments are the committer's, started
    with the worker); the yield floor follows the miner, published less often (each time is a
    transaction)."""
    settings = agent.settings
    published_at = float("-inf")
    while not stop.wait(settings.heartbeat_s):
        agent.beat()
        try:
            live = agent.live_challenges()  # the new events read once a beat, not once per use
            agent.answer_open_challenges(live)
            agent.settle_answered(live)  # an answered challenge past its window frees our pay
            agent.commit_forgotten_rounds()  # a round whose secret never reached us, from the chain's seed
            agent.jobs.refund_failed()
            if time.monotonic() - published_at >= settings.yield_publish_s:
                agent.publish_yield()
                published_at = time.monotonic()
        except ProviderAgentError as err:
            say(f"[yellow]heartbeat: {err}[/yellow]")
        except Exception as err:  # the next beat may succeed (node back, nonce freed): never let the thread die
            say(f"[yellow]heartbeat failed, retrying next beat: {type(err).__name__}: {err}[/yellow]")


# The operator's terminal: the agent's own lines (start, registration, jobs, PoG rounds, what needs
# action). Celery's line per task received and per task done (with the whole signed reply) and
# httpx's line per request (every heartbeat) are for debugging.
QUIET_LOGGERS = ("celery.worker.strategy", "celery.app.trace", "httpx")


class _RefusedOnce(logging.Filter):
    """Celery logs a task it was told to reject (Reject) as a warning with a traceback. Ours are
    the tasks client.task_auth refused, each logged there already in one line with the reason."""

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(record, "data", {}).get("description") != "rejected"


def quiet_terminal() -> None:
    """What is debugging only is shown only with --debug (a root logger at DEBUG)."""
    if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
        return
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("celery.app.trace").addFilter(_RefusedOnce())


def privileges_line() -> str | None:
    """Celery warns of any worker run as root, for fear of pickle: a message would run code.
    This worker takes JSON only, and only tasks signed by a party the chain allows
    (client.broker, client.task_auth), so its warning is not shown; what root is for here is said
    once instead."""
    if os.geteuid() != 0:
        return None
    return "running as root, as leases need (each lease's sandbox runs as an unprivileged user of its own)"


def run(agent: Agent, metrics: MetricsServer, say: Callable[[str], object]) -> None:
    """Registers if needed, mines when idle, serves `metrics` (bound, not started; its owner
    stops it), beats and
    takes jobs and PoG work from this provider's queue until the worker stops; `agent` is the
    process's (`use_agent`): the worker's tasks share it. `say` shows a line (Rich markup) to the
    operator."""
    from provider_agent.worker import app as celery_app

    quiet_terminal()  # before the first beat; the worker's logging set-up keeps these levels
    if agent.register():
        say(f"registered {agent.chain.address} with {len(agent.devices)} device(s)")
    queue = provider_queue(agent.chain.address)
    if agent.mining is not None:
        agent.mining.start()
    metrics.start(agent.status, lambda: agent.mining.telemetry.switches if agent.mining else [])
    stop = threading.Event()
    agent.beat()  # at once: the backend offers this provider from now on
    threading.Thread(target=heartbeat, args=(agent, stop, say), name="heartbeat", daemon=True).start()
    say(f"provider {agent.chain.address}: queue {queue}, metrics on :{metrics.port}")
    if line := privileges_line():
        say(line)
    assert "pickle" not in celery_app.conf.accept_content  # what Celery's root warning is about
    warnings.filterwarnings("ignore", category=SecurityWarning)
    try:
        celery_app.Worker(queues=[queue], pool="solo", concurrency=1, without_gossip=True,
                          without_mingle=True, loglevel="INFO", quiet=True).start()  # quiet: no banner
    finally:
        stop.set()
        if agent.mining is not None:
            agent.mining.stop()


__all__ = ["heartbeat", "run"]
