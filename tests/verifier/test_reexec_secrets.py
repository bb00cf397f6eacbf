"""Attack: the verifier's secrets in its environment must not reach the renter's model, which
the verifier re-executes. The child's environment is read from /proc while it runs."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from client.sandbox import ALLOWED, close_idle
from protocol.jobs import encode_output
from tests.client.procfs import ChildWatcher
from tests.tiny_models import Tiny
from verifier.reexec import Batch, ReexecLimits, reexecute

SECRET = "verifier-secret-4f1c"


def test_reexecuted_model_sees_only_the_allowlisted_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "password").write_text(SECRET + "\n")
    monkeypatch.setenv("UNCHAINED_PASSWORD_FILE", str(tmp_path / "password"))
    monkeypatch.setenv("UNCHAINED_VERIFIER_KEYSTORE_PASSWORD", SECRET)  # what the old code read
    monkeypatch.setenv("UNCHAINED_VERIFIER_BROKER_URL", f"redis://verifier:{SECRET}@127.0.0.1:6379/0")
    monkeypatch.setenv("LD_PRELOAD", "")
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(Tiny()), buffer)
    items = tuple(encode_output(np.ones(8, np.float32) * i) for i in range(3))
    close_idle()  # a template warmed by an earlier test started before these secrets were set
    with ChildWatcher(os.getpid(), "client.sandbox_child") as watcher:
        outputs = reexecute(1, buffer.getvalue(), "torchscript", [Batch(0, items)], ReexecLimits(2 << 30, 60.0),
                            tmp_path / "work")
    assert sorted(outputs) == [0, 1, 2]
    assert len(watcher.seen) == 1, "the re-execution child was never seen running"
    [env] = watcher.seen.values()
    assert set(env) <= ALLOWED, sorted(set(env) - ALLOWED)
    assert not any(SECRET in value or "password" in value for value in env.values())
    assert env["HOME"] != os.environ.get("HOME") and not Path(env["HOME"]).exists()  # the sandbox's own, not a host path
