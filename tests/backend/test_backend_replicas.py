"""Backend replicas on one PostgreSQL database: one leader indexes and dispatches, a killed leader is
replaced, a new leader sends what a dead one indexed but never dispatched (also when the leader is
SIGKILLed inside a dispatch), migrations run once."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import backend_support as support
import pytest
import redis
from sqlalchemy import func, select, text

from backend import models as m
from backend.db import make_engine, migrate
from backend.dispatch import UNSETTLED
from backend.leader import LOCK_KEY_SQL, LOCK_NAME, Leadership
from backend.runtime import Backend
from protocol.broker import provider_keyprefix
from protocol.merkle import keccak256
from protocol.tasks import provider_queue
from tests.support.waiting import wait_until

T = TypeVar("T")


def run_job_ids(redis_url: str, provider: str) -> list[str]:
    """The task ids of the run_job messages waiting on a provider's queue."""
    queue = provider_queue(provider)
    raw = redis.Redis.from_url(redis_url).lrange(provider_keyprefix(queue.removeprefix("provider.")) + queue, 0, -1)
    return [json.loads(r)["headers"]["id"] for r in raw]


def test_replicas_starting_together_migrate_once(pg_url) -> None:  # type: ignore[no-untyped-def]
    engines = [make_engine(pg_url) for _ in range(3)]
    errors: list[BaseException] = []

    def start(engine) -> None:  # type: ignore[no-untyped-def]
        try:
            migrate(engine)
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    with engines[0].connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
    for e in engines:
        e.dispose()


def test_one_leader_at_a_time_and_a_killed_leader_is_replaced(pg_url) -> None:  # type: ignore[no-untyped-def]
    migrate(make_engine(pg_url))
    # The first leader is another process, killed outright: its lock goes with its connection.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from backend.db import make_engine; from backend.leader import Leadership;"
         " lead = Leadership(make_engine(sys.argv[1])); print(lead.hold(), flush=True); time.sleep(600)", pg_url],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
        ours, third = Leadership(make_engine(pg_url)), Leadership(make_engine(pg_url))
        assert not ours.hold() and not third.hold()
        holder.kill()
        holder.wait(10)
        wait_until(lambda: ours.hold(), 10, "a replica takes the dead leader's lock")
        assert not third.hold()
        ours.step_down(rest_s=60)  # e.g. its broker refused: another replica takes over
        assert not ours.hold() and third.hold()
        third.release()
        assert not ours.hold(), "a replica resting after stepping down does not take the lock back at once"
    finally:
        holder.kill()


def test_a_new_leader_dispatches_what_a_dead_leader_indexed_but_never_sent(  # type: ignore[no-untyped-def]
        chain, session, market, tmp_path, pg_url, redis_url, dispatch_key) -> None:
    # Replica 1 indexes the funded jobs and dies before dispatching one (its dispatcher never ran:
    # dispatch off), and leaves another with its dispatch row written but never sent (a dead broker).
    first = Backend.open(support.make_settings(chain, tmp_path / "r1", database_url=pg_url, dispatch=False))
    stranded = support.funded_job(session, market.renter, market.provider, keccak256(b"stranded"), 10**15)
    first.make_indexer().sync()
    first.close()
    unsent_settings = support.make_settings(chain, tmp_path / "r2", database_url=pg_url, dispatch=True,
                                            broker_url="redis://127.0.0.1:1/0", **dispatch_key)
    second = Backend.open(unsent_settings)
    unsent = support.funded_job(session, market.renter, market.provider, keccak256(b"unsent"), 10**15)
    second.make_indexer().sync()
    with second.factory() as db:
        assert db.get(m.Dispatch, unsent).task_id is None and db.get(m.Dispatch, stranded) is None
    second.close()

    # Replica 3 reaches the broker; it becomes the leader and sends both, once each.
    third = Backend.open(support.make_settings(chain, tmp_path / "r3", database_url=pg_url, dispatch=True,
                                               broker_url=redis_url, run_indexer=True, index_poll_seconds=0.1,
                                               ws_url="off", **dispatch_key))
    try:
        third.start_indexer()
        wait_until(lambda: {f"run-job-{stranded}", f"run-job-{unsent}"} <= set(run_job_ids(redis_url, market.provider)),
                   30, "the new leader dispatches both stranded jobs")
        ids = run_job_ids(redis_url, market.provider)
        assert ids.count(f"run-job-{stranded}") == 1 and ids.count(f"run-job-{unsent}") == 1
    finally:
        third.close()


def test_two_live_replicas_dispatch_every_job_exactly_once(  # type: ignore[no-untyped-def]
        chain, session, market, tmp_path, pg_url, redis_url, dispatch_key) -> None:
    replicas = [Backend.open(support.make_settings(chain, tmp_path / f"r{i}", database_url=pg_url, dispatch=True,
                                                   broker_url=redis_url, run_indexer=True, index_poll_seconds=0.05,
                                                   ws_url="off", **dispatch_key)) for i in range(2)]
    try:
        for replica in replicas:
            replica.start_indexer()
        jobs = [support.funded_job(session, market.renter, market.provider, keccak256(b"both%d" % i), 10**15)
                for i in range(10)]
        wanted = {f"run-job-{j}" for j in jobs}
        wait_until(lambda: wanted <= set(run_job_ids(redis_url, market.provider)), 30, "every job dispatched")
        ids = [i for i in run_job_ids(redis_url, market.provider) if i in wanted]
        assert sorted(ids) == sorted(wanted)  # each once
        assert sum(r.leadership.leading for r in replicas) == 1
        with replicas[0].factory() as db:  # one indexer wrote the events: none twice, none lost
            events = db.scalar(select(func.count()).select_from(m.ChainEvent).where(m.ChainEvent.event == "JobCreated"))
            assert events == db.scalar(select(func.count()).select_from(m.Job))
    finally:
        for replica in replicas:
            replica.close()


def leader_lock_held(url: str) -> bool:
    """Whether some replica holds the leader lock: read from pg_locks, never by taking it (a probe
    that took and released it could keep the replica it watches from taking it)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return bool(conn.execute(text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                f" AND ((classid::bigint << 32) | objid::bigint) = {LOCK_KEY_SQL}"), {"name": LOCK_NAME}).scalar())
    finally:
        engine.dispose()


def wait_for_leader(leader: subprocess.Popen[bytes], output: Path, condition: Callable[[], T], timeout: float,
                    what: str) -> T:
    """wait_until for something the leader replica brings about; a failure says whether the leader
    died (its status and output) or lived and never got there (its last log lines)."""
    reached: list[T] = []

    def done() -> bool:
        value = condition()
        if value:
            reached.append(value)
        return bool(value) or leader.poll() is not None

    try:
        wait_until(done, timeout, what)
    except AssertionError:
        raise AssertionError(f"not within {timeout:g}s: {what}; the leader replica is alive, its last log lines:\n"
                             + "\n".join(output.read_text(errors="replace").splitlines()[-40:])) from None
    if not reached:
        raise AssertionError(f"{what}: the leader replica exited with status {leader.returncode}, its output:\n"
                             + output.read_text(errors="replace")[-8000:])
    return reached[0]


@pytest.mark.parametrize("window", ["stored", "row"])
def test_a_leader_killed_mid_dispatch_leaves_every_job_dispatched_exactly_once(  # type: ignore[no-untyped-def]
        window, chain, session, market, tmp_path, pg_url, redis_url, dispatch_key) -> None:
    # The leader is a replica process that stops dead at `window` of its first dispatch (after it
    # stored JobCreated; after it wrote the dispatch row), and is SIGKILLed there while the other
    # replica runs beside it.
    def settings(name: str):  # type: ignore[no-untyped-def]
        return support.make_settings(chain, tmp_path / name, database_url=pg_url, dispatch=True, broker_url=redis_url,
                                     run_indexer=True, index_poll_seconds=0.05, ws_url="off", **dispatch_key)

    redis.Redis.from_url(redis_url).flushdb()  # the module's earlier tests queued run-job messages too
    marker = tmp_path / "paused"
    first = session.contract("JobEscrow").functions.jobCount().call() + 1  # the module's earlier jobs go as usual
    output = tmp_path / "leader.log"
    with output.open("wb") as sink:
        leader = subprocess.Popen([sys.executable, str(Path(__file__).with_name("paused_replica.py")), window,
                                   str(first), str(marker), settings("leader").model_dump_json()],
                                  stdout=sink, stderr=subprocess.STDOUT)
    other = None
    try:
        wait_for_leader(leader, output, lambda: leader_lock_held(pg_url), 60, "the replica process takes the leader lock")
        other = Backend.open(settings("other"))
        other.start_indexer()
        jobs = [support.funded_job(session, market.renter, market.provider, keccak256(b"%s-%d" % (window.encode(), i)),
                                   10**15) for i in range(4)]
        paused = int(wait_for_leader(leader, output, lambda: marker.exists() and marker.read_text(), 60,
                                     f"the leader pauses at {window}"))
        assert paused in jobs and other.leadership is not None and not other.leadership.leading
        with other.factory() as db:  # the window is the one asked for: nothing sent, a row only after `stored`
            row = db.get(m.Dispatch, paused)
            assert db.get(m.Job, paused) is not None
            assert (row is None) if window == "stored" else (row is not None and row.task_id is None)
        assert f"run-job-{paused}" not in run_job_ids(redis_url, market.provider)

        leader.kill()
        leader.wait(10)
        wait_until(lambda: {f"run-job-{j}" for j in jobs} <= set(run_job_ids(redis_url, market.provider)), 60,
                   "the surviving replica dispatches every job")
        assert other.leadership.leading

        def funded_and_rows() -> tuple[set[int], list[m.Dispatch]]:
            with other.factory() as db:  # every job the chain shows funded (the module's earlier ones too)
                funded = set(db.scalars(select(m.Job.job_id).where(m.Job.status.in_(UNSETTLED))))
                return funded, list(db.scalars(select(m.Dispatch)))

        def all_recorded() -> bool:
            funded, rows = funded_and_rows()
            sent = {d.job_id: d.task_id for d in rows}
            return all(sent.get(j) for j in funded)

        # A message reaches Redis just before its row records the send: wait for the rows too.
        wait_until(all_recorded, 30, "every funded job's dispatch row records its send")
        funded, rows = funded_and_rows()
        sent = {d.job_id: d.task_id for d in rows}
        assert set(jobs) <= funded
        assert {j: sent.get(j) for j in funded} == {j: f"run-job-{j}" for j in funded}  # each has a sent dispatch
        assert None not in sent.values()  # nothing stranded: no dispatch row waits unsent
        ours = [d.task_id for d in rows if d.queue == provider_queue(market.provider)]
        assert sorted(run_job_ids(redis_url, market.provider)) == sorted(ours)  # each sent exactly once
    finally:
        leader.kill()
        leader.wait(10)
        if other is not None:
            other.close()
