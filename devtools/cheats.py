"""Cheats planted into the real provider agent, for the demo and for the tests that prove they
are caught. Nothing here is used by an honest process.

`UNCHAINED_CHEAT` says which cheats a process plays, as comma-separated `name=value` pairs:
- `pog-from-round=N`: from the N-th PoG round this process computes on, commit roots over
  random values instead of C = A.B and answer every challenge (the verifier's off-chain secret
  and the on-chain one) from that fake: the Merkle proofs are valid, the elements are wrong, so
  the verifier proves fraud on-chain. The rounds before it are honest, so the cheater gets
  listed and can win a job first.
- `job-every=N`: the model's output is wrong (+1 on every value) for the job items whose index
  is a multiple of N (items 0, N, 2N, ...), before they are committed.

e.g. `UNCHAINED_CHEAT=pog-from-round=2,job-every=5`. A process started with
`devtools/cheater_site` first on PYTHONPATH and that variable set plays them from start-up.
An honest agent gives its model child an allowlisted environment (client.sandbox), so the
cheating agent hands both variables on to its model child itself, as a cheater would. Each cheat is planted only when
the code it patches is imported, so a process that never loads it pays nothing.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import logging
import os
import re
import sys
from pathlib import Path
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

import numpy as np

from protocol.merkle import MerkleTree
from protocol.pog.challenge import challenge_indices
from protocol.pog.commitment import CHUNK_ELEMENTS, chunk_hashes, chunk_position, encode
from protocol.pog.messages import ChunkAnswer, GpuAnswers, GpuCommitment, RoundAnswers, RoundCommitment
from protocol.pog.workload import gpu_seed
from unchained_cli.errors import CliError

logger = logging.getLogger(__name__)

CHEAT_ENV = "UNCHAINED_CHEAT"
FORMAT = "comma-separated name=value pairs with names pog-from-round, job-every and positive integer values"
_NAMES = ("pog-from-round", "job-every")
FAKE_BOUND = 2**20  # fake elements in [-2^20, 2^20): far from any true C (|C| <= 64 n)
_FAKE_PANEL_ROWS = 256


class CheatError(CliError):
    """Root of the errors raised here."""


class CheatSpecError(CheatError):
    """`UNCHAINED_CHEAT` does not parse: the message names the bad part and the format."""


@dataclass(frozen=True)
class CheatPlan:
    """Which cheats a process plays (None: played honestly)."""

    pog_from_round: int | None = None
    job_every: int | None = None


def parse(text: str) -> CheatPlan:
    """`pog-from-round=2,job-every=5` -> CheatPlan(2, 5); raises CheatSpecError on anything else."""
    values: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = (p.strip() for p in part.partition("="))
        if not sep:
            raise CheatSpecError(f"{part.strip()!r} is not name=value; expected {FORMAT}")
        if name not in _NAMES:
            raise CheatSpecError(f"unknown cheat {name!r}; expected {FORMAT}")
        if name in values:
            raise CheatSpecError(f"cheat {name!r} given twice")
        if not re.fullmatch(r"[0-9]+", value) or int(value) < 1:
            raise CheatSpecError(f"{name}={value!r}: the value must be a positive integer")
        values[name] = int(value)
    return CheatPlan(values.get("pog-from-round"), values.get("job-every"))


def install(plan: CheatPlan) -> None:
    """Plants the plan's cheats in this process (each when its target module is imported)."""
    if plan.pog_from_round is not None:
        _when_imported("provider_agent.pog_service", functools.partial(plant_pog_cheat, plan.pog_from_round))
    if plan.job_every is not None:
        _when_imported("protocol.inference", functools.partial(plant_job_cheat, plan.job_every))
        _when_imported("client.sandbox", functools.partial(plant_child_cheat, plan))


def install_from_env(environ: Mapping[str, str] = os.environ) -> CheatPlan | None:
    """Plants the cheats that `UNCHAINED_CHEAT` names; unset or empty: none (returns None)."""
    text = environ.get(CHEAT_ENV, "").strip()
    if not text:
        return None
    plan = parse(text)
    install(plan)
    return plan


# -- planting ------------------------------------------------------------------------------------

class _PatchOnImport(MetaPathFinder):
    """Runs `patch(module)` right after `name` is first imported, then leaves sys.meta_path."""

    def __init__(self, name: str, patch: Callable[[ModuleType], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once, and so that the real finders answer the lookup below
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        execute, patch = spec.loader.exec_module, self.patch

        def exec_then_patch(module: ModuleType) -> None:
            execute(module)
            patch(module)

        spec.loader.exec_module = exec_then_patch  # type: ignore[method-assign]
        return spec


def _when_imported(name: str, patch: Callable[[ModuleType], None]) -> None:
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
    else:
        sys.meta_path.insert(0, _PatchOnImport(name, patch))


def plant_pog_cheat(from_round: int, pog_service: ModuleType) -> None:
    """PogService builds one prover per round through its module's `PogProver`: replace it."""
    from provider_agent.pog_prover import PogProver

    pog_service.PogProver = PogCheat(from_round, PogProver)


def plant_job_cheat(every: int, inference: ModuleType) -> None:
    """The job's model child runs its items through `protocol.inference.run_batches`: wrap it."""
    honest = getattr(inference.run_batches, "__wrapped__", inference.run_batches)  # planted once

    @functools.wraps(honest)
    def cheating(run: Any, items: Sequence[np.ndarray], batch_size: int, first_index: int = 0) -> list[np.ndarray]:
        return corrupt_every(every, honest(run, items, batch_size, first_index), first_index)

    inference.run_batches = cheating


def plant_child_cheat(plan: CheatPlan, sandbox: ModuleType) -> None:
    """The model child runs the job: the cheater's agent gives it the cheater's site and plan,
    and lets its sandbox see the package that site imports."""
    honest = getattr(sandbox.child_environment, "__wrapped__", sandbox.child_environment)  # planted once
    text = ",".join(f"{name}={value}" for name, value in zip(_NAMES, (plan.pog_from_round, plan.job_every))
                    if value is not None)
    site = Path(__file__).resolve().parent / "cheater_site"

    @functools.wraps(honest)
    def cheating(threads: int, home: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        env = honest(threads, home, environ)
        env.update(PYTHONPATH=f"{site}{os.pathsep}{env['PYTHONPATH']}", **{CHEAT_ENV: text})
        return env

    sandbox.child_environment = cheating
    # The sandbox shows the model only the packages it needs; the cheater's site imports this one
    # (and the CLI's errors it raises).
    for package in ("devtools", "unchained_cli"):
        if package not in sandbox.SANDBOX_PACKAGES:
            sandbox.SANDBOX_PACKAGES = (*sandbox.SANDBOX_PACKAGES, package)


# -- the job cheat -------------------------------------------------------------------------------

def corrupt_every(every: int, outputs: Sequence[np.ndarray], first_index: int = 0) -> list[np.ndarray]:
    """`outputs` of items first_index, first_index + 1, ...: +1 on every value of the items whose
    index is a multiple of `every`, the others untouched."""
    return [o + 1 if (first_index + i) % every == 0 else o for i, o in enumerate(outputs)]


# -- the PoG cheat -------------------------------------------------------------------------------

def fake_rows(seed: bytes, n: int, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of the fake product for a GPU's seed: random, but fixed by the seed, so
    a cheater that recomputes a round (after a restart) answers from the fake it committed."""
    entropy = int.from_bytes(seed, "big")
    return np.stack([np.random.default_rng([entropy, row]).integers(-FAKE_BOUND, FAKE_BOUND, n, dtype=np.int32)
                     for row in range(start, stop)])


@dataclass(frozen=True)
class FakeWork:
    """One device's commitment over a fake product; answers as provider_agent's DeviceWork
    does, with valid inclusion proofs of wrong elements."""

    gpu_index: int
    uuid_hash: bytes
    n: int
    seed: bytes  # the GPU's seed (gpu_seed), which fixes the fake
    tree: MerkleTree

    @property
    def commitment(self) -> GpuCommitment:
        return GpuCommitment(self.gpu_index, self.uuid_hash, self.n, self.tree.root)

    def answer(self, indices: Sequence[int]) -> tuple[ChunkAnswer, ...]:
        answers = []
        for index in indices:
            row, col = chunk_position(self.n, index)
            chunk = fake_rows(self.seed, self.n, row, row + 1)[0, col:col + CHUNK_ELEMENTS]
            answers.append(ChunkAnswer(index, encode(chunk), tuple(self.tree.proof(index))))
        return tuple(answers)


class SkippingProver:
    """Commits to random values instead of C = A.B (no matmul) and answers from them: its Merkle
    proofs are valid, its elements are not. Same surface as PogProver: commit_round,
    answer_round, and `work` (one entry per device, each answering challenged indices)."""

    def __init__(self, *uuid_hashes: bytes) -> None:
        self.uuid_hashes = uuid_hashes
        self.round_seed: bytes | None = None
        self.work: list[FakeWork] = []

    def commit_round(self, round_seed: bytes, n: int) -> RoundCommitment:
        self.work = []
        for g, uuid_hash in enumerate(self.uuid_hashes):
            seed = gpu_seed(round_seed, g, uuid_hash)
            leaves = b"".join(chunk_hashes(fake_rows(seed, n, r, min(n, r + _FAKE_PANEL_ROWS)))
                              for r in range(0, n, _FAKE_PANEL_ROWS))
            self.work.append(FakeWork(g, uuid_hash, n, seed, MerkleTree(leaves)))
        self.round_seed = round_seed
        return RoundCommitment(round_seed, tuple(w.commitment for w in self.work))

    def answer_round(self, randomness: bytes, k: int) -> RoundAnswers:
        if self.round_seed is None:
            raise CheatError("answer_round before commit_round")
        return RoundAnswers(self.round_seed, tuple(
            GpuAnswers(w.gpu_index, w.answer(challenge_indices(randomness, w.tree.root, w.tree.size, k)))
            for w in self.work))


class PogCheat:
    """Stands in for PogProver in PogService, which builds one prover per round it computes:
    honest for this process's rounds before `from_round`, a SkippingProver from it on.

    Counted per process: a restarted cheater starts again with honest rounds (its fakes stay
    the same, being fixed by the seed)."""

    def __init__(self, from_round: int, honest: Callable[..., Any]) -> None:
        self.from_round = from_round
        self.honest = honest
        self._rounds = itertools.count(1)  # next() is atomic: rounds may start on two threads

    def __call__(self, devices: Sequence[Any], dtype: str | None = None) -> Any:
        number = next(self._rounds)
        if number < self.from_round:
            return self.honest(devices, dtype)
        logger.warning("cheat: PoG round %s of this process commits random values, not C = A.B", number)
        return SkippingProver(*(d.uuid_hash for d in devices))


__all__ = ["CHEAT_ENV", "CheatError", "CheatPlan", "CheatSpecError", "FakeWork", "PogCheat", "SkippingProver",
           "corrupt_every", "fake_rows", "install", "install_from_env", "parse", "plant_job_cheat",
           "plant_pog_cheat"]
