"""A backend replica (indexer and dispatcher) that stops dead inside a dispatch, for
test_backend_replicas.py to SIGKILL it there.

Usage: python paused_replica.py WINDOW FIRST_JOB MARKER SETTINGS_JSON, WINDOW one of
- `stored`: JobCreated is indexed and committed, the dispatch row not yet written;
- `row`: the dispatch row is committed, the message not yet sent.
Jobs before FIRST_JOB (the chain's history) are dispatched as usual; at the first job from FIRST_JOB
on that reaches WINDOW it writes the job id to MARKER and waits to be killed. It logs at INFO on
stderr (leader lock taken or lost, dispatches, failed passes): the test shows those lines when the
replica never pauses.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.dispatch import Dispatcher
from backend.runtime import Backend
from backend.settings import Settings
from protocol.escrow_job import EscrowJob


def main(window: str, first_job: int, marker: Path, settings_json: str) -> None:
    def paused(method: Callable[..., Any]) -> Callable[..., Any]:
        def pause_or_call(self: Dispatcher, job: EscrowJob, *args: Any) -> Any:
            if job.id >= first_job:
                marker.write_text(str(job.id))
                time.sleep(3600)
            return method(self, job, *args)
        return pause_or_call

    if window == "stored":
        Dispatcher.dispatch = paused(Dispatcher.dispatch)  # type: ignore[method-assign]
    elif window == "row":
        Dispatcher._send = paused(Dispatcher._send)  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown window {window!r}: stored or row")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    backend = Backend.open(Settings.model_validate_json(settings_json))
    backend.start_indexer()
    assert backend._thread is not None
    backend._thread.join()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
