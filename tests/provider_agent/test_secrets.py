"""Attack (issue 11): the provider's password typed at `provider run`'s prompt, and any secret in
its environment, must never reach a job's model. The old agent put the typed password into
os.environ and every model child inherited the whole environment. Here a real `provider run`
is given its password on a terminal (a pty), with a secret planted in its environment; its
model child (the warm one that will run the next job) is read from outside through /proc."""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import threading
import time

from client.sandbox import ALLOWED
from client.ports import free_port
from tests.client.procfs import children, environ_of
from tests.support.provider_market import PASSWORD
from unchained_cli.chain import REPO_ROOT as REPO

SECRET = "provider-secret-93ab"


class Terminal:
    """A command on its own pty: output drained by a thread, keystrokes written on request."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.chdir(REPO)
            os.execve(argv[0], argv, env)
        self.output = b""
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if ready:
                    chunk = os.read(self.fd, 4096)
                    if not chunk:
                        return
                    self.output += chunk
            except OSError:
                return

    def wait_for(self, predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return True
            if os.waitpid(self.pid, os.WNOHANG) != (0, 0):
                raise AssertionError(f"provider exited:\n{self.output.decode(errors='replace')[-3000:]}")
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
            end = time.monotonic() + 20
            while time.monotonic() < end and os.waitpid(self.pid, os.WNOHANG) == (0, 0):
                time.sleep(0.1)
            else:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def test_typed_password_and_planted_secret_never_reach_the_model_child(settings_for, market, redis_url,
                                                                         keystore) -> None:
    settings = settings_for()
    env = {k: v for k, v in os.environ.items() if k != "UNCHAINED_PASSWORD_FILE"}
    env.update({"PYTHONPATH": str(REPO), "UNCHAINED_PROVIDER_DEPLOYMENTS_DIR": str(market.deployments_dir),
                "UNCHAINED_PROVIDER_STAKE_WEI": str(2 * 10**18), "AWS_SECRET_ACCESS_KEY": SECRET,
                "UNCHAINED_PROVIDER_METADATA_URI": f"https://user:{SECRET}@example.invalid/"})
    terminal = Terminal([sys.executable, "-c", "from provider_agent.cli import provider_app; provider_app()", "run",
                         "--rpc", market.chain.rpc_url, "--keystore", str(keystore), "--broker", redis_url,
                         "--content-dir", str(settings.content_dir), "--data-dir", str(settings.data_dir),
                         "--metrics-port", str(free_port()), "--no-mining"], env)
    try:
        assert terminal.wait_for(lambda: terminal.output.rstrip().endswith(b":"), 120), terminal.output
        assert b"password for " in terminal.output
        os.write(terminal.fd, PASSWORD.encode() + b"\n")
        # The agent starts its next job's model child ahead of the job (runner.prewarm).
        assert terminal.wait_for(lambda: children(terminal.pid, "client.sandbox_child"), 120), \
            terminal.output.decode(errors="replace")[-3000:]
        [child] = children(terminal.pid, "client.sandbox_child")
        seen = environ_of(child)
    finally:
        terminal.stop()
    assert not [name for name, value in seen.items() if PASSWORD in value], "the typed password reached the model"
    assert not [name for name, value in seen.items() if SECRET in value]
    assert set(seen) <= ALLOWED, sorted(set(seen) - ALLOWED)
    assert PASSWORD.encode() not in terminal.output  # the prompt did not echo it either
