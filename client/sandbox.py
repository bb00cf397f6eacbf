"""What a sandboxed model child may see of its parent: an allowlisted environment.

A job's model is untrusted code (the renter's), run by the provider and re-run by verifiers. Its
child process gets a fresh environment built here, never a copy of the parent's: only what the
interpreter, torch and the thread pools need (PATH, locale, thread counts, the GPU selection, a
private temporary HOME), so no secret of the agent (a broker URL with credentials, a password
file's path, API tokens, whatever the operator exported) can reach the model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

# Copied from the parent when set: none of them carries a secret, each changes how the child runs.
INHERITED = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ",
             "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
# Set here, whatever the parent has.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "UNCHAINED_JOB_THREADS")
SET_HERE = (*THREAD_VARIABLES, "OMP_WAIT_POLICY", "HOME", "TMPDIR", "PYTHONPATH", "PYTHONNOUSERSITE",
            "PYTHONDONTWRITEBYTECODE")
ALLOWED = frozenset(INHERITED + SET_HERE)
# The directory that holds the `protocol`, `provider_agent` and `verifier` packages: the child
# imports its entry module from there, also when the project is not installed.
PACKAGES_ROOT = Path(__file__).resolve().parent.parent


def child_environment(threads: int, home: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a model child: the allowlist, `threads` for every thread pool,
    `home` (a private temporary directory) as HOME and TMPDIR."""
    parent = os.environ if environ is None else environ
    env = {name: parent[name] for name in INHERITED if name in parent}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    env.update({name: str(max(1, threads)) for name in THREAD_VARIABLES})
    env.update(OMP_WAIT_POLICY="PASSIVE", HOME=str(home), TMPDIR=str(home), PYTHONPATH=str(PACKAGES_ROOT),
               PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def private_home() -> Path:
    """A fresh 0700 temporary directory for one child's HOME and TMPDIR (nothing shared between jobs)."""
    return Path(tempfile.mkdtemp(prefix="unchained-sandbox-"))


def remove_home(home: Path) -> None:
    shutil.rmtree(home, ignore_errors=True)


__all__ = ["ALLOWED", "INHERITED", "PACKAGES_ROOT", "SET_HERE", "child_environment", "private_home", "remove_home"]
