"""The agent's local job record: WAL mode (commits are not synced one by one), one statement per
update that keeps what it is not given, claims that exclude a live holder."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from provider_agent.state import COMMITTED, COMPUTED, FAILED, RUNNING, JobBusy, JobStore


def test_the_database_is_in_wal_mode_with_normal_sync(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state.db")
    store.update(1, RUNNING)
    assert sqlite3.connect(tmp_path / "state.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._connect().execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_an_update_keeps_what_it_is_not_given_and_a_finished_job_has_no_holder(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state.db")
    store.claim(7, deadline=1000)
    store.update(7, COMPUTED, root=b"r" * 32, item_count=8)
    computed = store.get(7)
    assert computed is not None and computed.pid == os.getpid() and computed.deadline == 1000
    store.update(7, COMMITTED)
    record = store.get(7)
    assert record is not None
    assert (record.status, record.root, record.item_count, record.deadline, record.pid) == \
        (COMMITTED, b"r" * 32, 8, 1000, None)
    store.update(8, FAILED, error="timeout: too slow")  # a job never claimed here is recorded too
    assert store.get(8).error == "timeout: too slow"  # type: ignore[union-attr]


def test_a_job_held_by_a_live_process_cannot_be_claimed(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state.db")
    other = subprocess.Popen([sys.executable, "-c",
                              "import sys; from pathlib import Path; from provider_agent.state import JobStore;"
                              "JobStore(Path(sys.argv[1])).claim(3, 10); print('claimed', flush=True);"
                              "sys.stdin.read()", str(tmp_path / "state.db")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "claimed"  # type: ignore[union-attr]
        with pytest.raises(JobBusy):
            store.claim(3, 10)
    finally:
        other.kill()
        other.wait()
    assert store.claim(3, 10).pid == os.getpid()  # its holder is gone: taken over


def test_threads_each_use_their_own_connection(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state.db")
    errors: list[BaseException] = []

    def work(first: int) -> None:
        try:
            for job in range(first, first + 20):
                store.claim(job, 10)
                store.update(job, COMMITTED)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i * 100,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len([r for r in store.all() if r.status == COMMITTED]) == 80
