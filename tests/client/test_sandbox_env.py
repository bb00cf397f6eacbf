"""A model child's environment is built from an allowlist, never copied from its parent."""

from __future__ import annotations

from pathlib import Path

from client.sandbox import ALLOWED, PACKAGES_ROOT, child_environment


def test_nothing_outside_the_allowlist_reaches_the_child(tmp_path: Path) -> None:
    parent = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "0",
              "UNCHAINED_PASSWORD_FILE": "/secret/path", "AWS_SECRET_ACCESS_KEY": "s3cr3t",
              "UNCHAINED_PROVIDER_BROKER_URL": "redis://user:s3cr3t@host/0", "HOME": "/root",
              "PYTHONPATH": "/evil", "OMP_NUM_THREADS": "64", "LD_PRELOAD": "/evil.so"}
    env = child_environment(2, tmp_path, parent)
    assert set(env) <= ALLOWED
    assert not any("s3cr3t" in v or "secret" in v or "evil" in v for v in env.values())
    assert env["PATH"] == "/usr/bin" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "2"
    assert env["PYTHONPATH"] == str(PACKAGES_ROOT)


def test_an_empty_parent_still_gives_a_runnable_child(tmp_path: Path) -> None:
    env = child_environment(0, tmp_path, {})
    assert env["PATH"] and env["LANG"] and env["OMP_NUM_THREADS"] == "1"
