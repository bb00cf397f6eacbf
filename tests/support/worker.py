"""The provider agent's Celery worker as its own process, configured by environment (as an
operator runs it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from provider_agent.settings import Settings
from unchained_cli.chain import REPO_ROOT as REPO
from devtools.cheats import CHEAT_ENV
from devtools.market import CHEATER_SITE



class Worker:
    """`celery worker` for `queue`, its log appended to `log` (if given). With `cheat`, the
    cheater's site goes first on its path and UNCHAINED_CHEAT is set (devtools/cheats.py),
    which its agent hands on to its model child (devtools.cheats.plant_child_cheat)."""

    def __init__(self, settings: Settings, queue: str, log: Path | None = None, cheat: str | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        if cheat is not None:
            env.update({"PYTHONPATH": f"{CHEATER_SITE}{os.pathsep}{REPO}", CHEAT_ENV: cheat})
        for name, value in settings.model_dump().items():
            if value is not None:
                env[f"UNCHAINED_PROVIDER_{name.upper()}"] = str(value)
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "provider_agent.worker:app", "worker", "-Q", queue, "-P", "solo",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL,
            stderr=open(log, "ab") if log else subprocess.DEVNULL)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
