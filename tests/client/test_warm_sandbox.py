"""The warm sandboxed executor: a template that imported torch once forks a fresh child per job,
inside bubblewrap's namespaces. What a hostile model could try is done here by a probe planted
where a model runs (a `sitecustomize` on the template's PYTHONPATH wraps `run_batches`, so it runs
in the job child exactly where the model's own code runs) and reported back through the model's
error message."""

from __future__ import annotations

import json
import logging
import os
import platform
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

import client.sandbox
from client.sandbox import (ALLOWED, ISOLATION_ENV, ItemBatch, Limits, SandboxFailed, SandboxUnavailable,
                            run_model)
from protocol.jobs import decode_output, encode_output
from client.sandbox_child import COLLAPSE_AFTER_JOBS
from tests.tiny_models import Hangs, Hogs

PROBE = '''
import json, os, socket
from pathlib import Path

import protocol.inference as inference

CONFIG = json.loads((Path(__file__).parent / "probe.json").read_text())


def probe(run, items, batch_size, first_index=0):
    seen = {"env": sorted(os.environ), "left_global": globals().get("LEFT_BEHIND"),
            "home_files": sorted(os.listdir(os.environ["HOME"])), "job_files": sorted(os.listdir("."))}
    connection = socket.socket()
    connection.settimeout(5)
    try:
        connection.connect(("127.0.0.1", CONFIG["port"]))
        seen["connected"] = True
    except OSError as exc:
        seen["connected"] = str(exc)
    for name in ("secret", "outside_dir"):
        try:
            seen[name] = Path(CONFIG[name]).read_text() if name == "secret" else os.listdir(CONFIG[name])
        except OSError as exc:
            seen[name] = "refused: " + type(exc).__name__
    for target in ("/tmp/left-behind", os.path.join(os.environ["HOME"], "left-behind"), "left-behind"):
        try:
            Path(target).write_text("from job 1")
        except OSError:
            pass
    globals()["LEFT_BEHIND"] = os.getpid()
    raise inference.InferenceError("PROBE " + json.dumps(seen))


inference.run_batches = probe
'''


@pytest.fixture
def identity(tmp_path: Path) -> tuple[Path, list[Path]]:
    model = tmp_path / "identity.pt"
    torch.jit.save(torch.jit.script(torch.nn.Identity()), str(model))
    inputs = []
    for i in range(3):
        inputs.append(tmp_path / f"{i}.in")
        inputs[-1].write_bytes(encode_output(np.full(4, i, np.float32)))
    return model, inputs


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


# Leaves a process of its own running in the job's session that writes into the job directory
# (the next job's, by then) and its HOME a moment later; reports what it found there on arrival.
LINGERER = '''
import json, os, time

import protocol.inference as inference


def linger(run, items, batch_size, first_index=0):
    time.sleep(1.0)  # a process the last job left would write meanwhile
    seen = {"job_files": sorted(os.listdir(".")), "home_files": sorted(os.listdir(os.environ["HOME"]))}
    if os.fork() == 0:
        time.sleep(0.3)
        for target in ("late", os.path.join(os.environ["HOME"], "late")):
            with open(target, "w") as out:
                out.write("written after the job ended")
        os._exit(0)
    raise inference.InferenceError("PROBE " + json.dumps(seen))


inference.run_batches = linger
'''


def _plant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str) -> Path:
    """Makes every model child of this test run `code` as its sitecustomize; returns its directory."""
    site = tmp_path / "probe-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(code))
    honest = client.sandbox.child_environment

    def with_probe(threads: int, home: Path, environ=None) -> dict[str, str]:  # type: ignore[no-untyped-def]
        env = honest(threads, home, environ)
        env["PYTHONPATH"] = f"{site}{os.pathsep}{env['PYTHONPATH']}"
        return env

    monkeypatch.setattr(client.sandbox, "child_environment", with_probe)
    return site


@pytest.fixture
def probed(tmp_path: Path, listener: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every model child of this test runs the probe; returns the secret file it must not read."""
    site = _plant(tmp_path, monkeypatch, PROBE)
    secret_dir = tmp_path / "agent"  # as the agent's keystore sits beside its data
    secret_dir.mkdir()
    (secret_dir / "keystore.json").write_text("the agent's keystore")
    (site / "probe.json").write_text(json.dumps({"port": listener, "secret": str(secret_dir / "keystore.json"),
                                                 "outside_dir": str(tmp_path)}))
    return secret_dir / "keystore.json"


def _probe(model: Path, inputs: list[Path]) -> dict:
    with pytest.raises(SandboxFailed) as caught:
        run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
    assert caught.value.kind == "model-error" and "PROBE " in caught.value.message, caught.value
    return json.loads(caught.value.message.split("PROBE ", 1)[1])


def test_a_second_job_reuses_the_warm_template_in_a_fresh_child(identity) -> None:  # type: ignore[no-untyped-def]
    model, inputs = identity
    first = run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
    second = run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
    assert second.executor == first.executor  # the same template: torch was imported once
    assert second.child != first.child  # each job in its own forked process
    assert first.outputs == second.outputs
    assert [decode_output(second.outputs[i])[0] for i in range(3)] == [0, 1, 2]


def test_a_template_that_keeps_running_jobs_backs_its_memory_with_huge_pages(identity) -> None:  # type: ignore[no-untyped-def]
    model, inputs = identity
    runs = [run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
            for _ in range(COLLAPSE_AFTER_JOBS + 2)]
    assert len({run.executor for run in runs}) == 1 and len({run.child for run in runs}) == len(runs)
    assert all(run.outputs == runs[0].outputs for run in runs)  # forks after the collapse compute the same
    template = next(t for _, t in client.sandbox._the_pool().idle if t.generation == runs[0].executor)
    collapsed = re.search(r"collapsed (\d+) MiB into huge pages", template.log_tail())
    assert collapsed is not None, template.log_tail()  # once, after COLLAPSE_AFTER_JOBS jobs
    if kernel_collapses():
        assert int(collapsed.group(1)) >= 64  # most of what importing torch allocated


def test_a_model_sees_no_network_no_file_outside_its_job_and_only_allowlisted_variables(
        identity, probed, listener, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t")
    seen = _probe(*identity)
    assert seen["connected"] is not True  # 127.0.0.1:<listener> is the sandbox's own empty loopback
    assert seen["secret"].startswith("refused"), seen
    # The test's directory exists inside only as the mount point of the probe's own site.
    assert seen["outside_dir"] == ["probe-site"], seen
    assert set(seen["env"]) <= ALLOWED, sorted(set(seen["env"]) - ALLOWED)
    assert sorted(seen["job_files"]) == ["home", "in", "model", "out", "stderr"]


def test_nothing_a_job_leaves_behind_reaches_the_next_one(identity, probed) -> None:  # type: ignore[no-untyped-def]
    first, second = _probe(*identity), _probe(*identity)
    for seen in (first, second):  # job 1 set a global and wrote files in HOME and its directory
        assert seen["left_global"] is None, seen
        assert "left-behind" not in seen["home_files"] and "left-behind" not in seen["job_files"], seen


def test_the_next_job_waits_for_the_last_ones_files_to_be_cleared(identity, probed,
                                                                  monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The directory is emptied on the cleaner's thread after the caller has the outputs; a slow
    # emptying must hold the next job back, not let it see the last job's files.
    honest = client.sandbox._Template.reset

    def slow_reset(self):  # type: ignore[no-untyped-def]
        time.sleep(0.5)
        honest(self)

    first = _probe(*identity)
    monkeypatch.setattr(client.sandbox._Template, "reset", slow_reset)
    second, third = _probe(*identity), _probe(*identity)
    for seen in (first, second, third):
        assert "left-behind" not in seen["job_files"] and "left-behind" not in seen["home_files"], seen
        assert "error.json" not in seen["job_files"], seen


def test_a_template_whose_job_directory_cannot_be_emptied_runs_no_other_job(identity, monkeypatch,
                                                                            caplog) -> None:  # type: ignore[no-untyped-def]
    model, inputs = identity
    first = run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
    for _, template in client.sandbox._the_pool().idle:  # the first job's emptying is done honestly
        assert template.wait_clean() is None
    honest = client.sandbox._Template.reset

    def refused(self):  # type: ignore[no-untyped-def]
        raise PermissionError(13, "Permission denied", str(self.spool / "stuck"))

    monkeypatch.setattr(client.sandbox._Template, "reset", refused)
    second = run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
    [used] = [t for _, t in client.sandbox._the_pool().idle if t.generation == second.executor]
    assert isinstance(used.wait_clean(), PermissionError)  # refused on the cleaner's thread
    monkeypatch.setattr(client.sandbox._Template, "reset", honest)
    with caplog.at_level(logging.WARNING, logger="client.sandbox"):
        third = run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
    assert second.executor == first.executor  # the refusal comes after the second job's outputs
    assert third.executor != second.executor and third.outputs == first.outputs
    assert "not emptied" in caplog.text and "Permission denied" in caplog.text


def test_a_process_a_job_leaves_running_is_killed_before_the_next_job(identity, tmp_path,
                                                                      monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _plant(tmp_path, monkeypatch, LINGERER)
    first, second = _probe(*identity), _probe(*identity)
    for seen in (first, second):
        assert "late" not in seen["job_files"] and "late" not in seen["home_files"], seen


def test_a_job_past_its_time_is_killed_and_the_template_replaced(tmp_path, identity) -> None:  # type: ignore[no-untyped-def]
    model, inputs = identity
    before = run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
    hangs = tmp_path / "hangs.pt"
    torch.jit.save(torch.jit.script(Hangs()), str(hangs))
    with pytest.raises(SandboxFailed) as caught:
        run_model(hangs, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 3.0))
    assert caught.value.kind == "timeout" and "budget" in caught.value.message
    after = run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
    assert after.executor != before.executor and after.outputs == before.outputs


def test_a_job_past_its_memory_fails_alone_and_the_template_is_replaced(tmp_path, identity) -> None:  # type: ignore[no-untyped-def]
    model, inputs = identity
    before = run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(3 << 30, 60.0))
    hogs = tmp_path / "hogs.pt"
    torch.jit.save(torch.jit.script(Hogs()), str(hogs))
    with pytest.raises(SandboxFailed) as caught:
        run_model(hogs, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(3 << 30, 60.0))
    assert caught.value.kind == "out-of-memory" and "3072 MiB" in caught.value.message, caught.value
    after = run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(3 << 30, 60.0))
    assert after.executor != before.executor and after.outputs == before.outputs


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_a_dead_parent_takes_its_sandbox_and_running_job_down(tmp_path) -> None:  # type: ignore[no-untyped-def]
    hangs = tmp_path / "hangs.pt"
    torch.jit.save(torch.jit.script(Hangs()), str(hangs))
    item = tmp_path / "0.in"
    item.write_bytes(encode_output(np.zeros(4, np.float32)))
    script = ("import sys, threading; from pathlib import Path; from client.sandbox import ItemBatch, Limits, run_model;"
              "threading.Thread(target=run_model, args=(Path(sys.argv[1]), 'torchscript',"
              " [ItemBatch(0, (Path(sys.argv[2]),), 1)], Limits(2 << 30, 600.0)), daemon=True).start();"
              "sys.stdin.read()")
    parent = subprocess.Popen([sys.executable, "-c", script, str(hangs), str(item)], stdin=subprocess.PIPE,
                              cwd=client.sandbox.PACKAGES_ROOT)
    try:
        # bwrap, its pid-namespace init, the template and the job's child
        deadline = time.monotonic() + 120
        while len(sandbox := _descendants(parent.pid)) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(sandbox) >= 4, sandbox
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in sandbox) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in sandbox if _alive(pid)]
    finally:
        parent.kill()
        parent.wait()


def test_without_bwrap_the_executor_refuses_unless_told_to_run_unisolated(identity, tmp_path, monkeypatch,
                                                                          caplog) -> None:  # type: ignore[no-untyped-def]
    model, inputs = identity
    empty = tmp_path / "no-bwrap-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
    monkeypatch.setenv(ISOLATION_ENV, "nope")
    with pytest.raises(SandboxUnavailable, match=ISOLATION_ENV):
        run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
    monkeypatch.setenv(ISOLATION_ENV, "none")
    with caplog.at_level(logging.WARNING, logger="client.sandbox"):
        run = run_model(model, "torchscript", [ItemBatch(0, tuple(inputs), 2)], Limits(2 << 30, 60.0))
    assert [decode_output(run.outputs[i])[0] for i in range(3)] == [0, 1, 2]
    assert "WITHOUT namespace isolation" in caplog.text


THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

COLLAPSE_PROGRAM = """
import json
from client.sandbox_child import _collapse_into_huge_pages

def huge_kib():
    with open("/proc/self/smaps_rollup") as rollup:
        return next(int(line.split()[1]) for line in rollup if line.startswith("AnonHugePages:"))

memory = bytearray(64 << 20)  # touched: every page is there
memory[::4096] = b"x" * len(memory[::4096])
before = huge_kib()
collapsed = _collapse_into_huge_pages()
print(json.dumps({"before": before, "after": huge_kib(), "collapsed": collapsed, "intact": memory[8192] == 120}))
"""


def kernel_collapses() -> bool:
    release = tuple(int(part) for part in platform.release().split(".")[:2] if part.isdigit())
    return release >= (6, 1) and THP.is_file() and "[never]" not in THP.read_text()


@pytest.mark.skipif(not kernel_collapses(), reason="needs Linux 6.1+ (MADV_COLLAPSE) and THP not set to never")
def test_anonymous_memory_is_collapsed_into_huge_pages() -> None:
    done = subprocess.run([sys.executable, "-c", COLLAPSE_PROGRAM], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["intact"]
    # Most of the 64 MiB buffer (not all: its ends need not fall on 2 MiB boundaries).
    assert seen["after"] - seen["before"] >= 48 << 10
    assert seen["collapsed"] >= 48 << 20
