"""`unchained pog ...`: local Proof-of-GPU benchmark and self-proof (mounted by the root app).

`pog run` plays both sides on this box: the prover computes and commits on every device at
once, then the round is challenged and checked with the protocol's own rules (the same
`protocol.pog` functions a verifier runs: index derivation, inclusion and exact recomputation,
class identification), so a box can see what a verifier would decide before staking on it.
"""

from __future__ import annotations

import os
import time
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from protocol.errors import ProtocolError
from protocol.pog.challenge import MIN_K, challenge_indices
from protocol.pog.check import check_chunks
from protocol.pog.profiles import identify, lookup, n_for
from protocol.pog.workload import check_n, gpu_seed
from provider_agent import ProviderAgentError
from provider_agent.gpus import Device, detect, resolve
from provider_agent.pog_prover import TORCH_DTYPES, PogProver, benchmark_tflops, default_dtype

pog_app = typer.Typer(help="Proof of GPU: local benchmark and self-proof.", no_args_is_help=True)
console = Console()


@pog_app.callback()
def pog() -> None:
    """Proof of GPU: local benchmark and self-proof."""


@pog_app.command("run")
def run(
    n: Annotated[int | None, typer.Option(help="Matrix size (multiple of 64); default: the "
                                               "verifier's choice for the device's class.")] = None,
    device: Annotated[str | None, typer.Option(help="cpu or cuda:N; default: every GPU, "
                                                    "else the CPU.")] = None,
    k: Annotated[int, typer.Option(help="Challenged chunks per device.")] = MIN_K,
    dtype: Annotated[str | None, typer.Option(help="fp32, fp16 or bf16; default: fp32 on "
                                                   "CPU, fp16 on GPU.")] = None,
) -> None:
    """Generate, multiply, commit, self-challenge and verify; print TFLOPS, time split, class."""
    try:
        devices = [resolve(device)] if device else detect()
        chosen = dtype or default_dtype(devices[0])
        if chosen not in TORCH_DTYPES:
            raise ProviderAgentError(f"dtype {chosen!r} is not one of {sorted(TORCH_DTYPES)}")
        sizes = {g: check_n(n) if n else _verifier_n(d, chosen) for g, d in enumerate(devices)}
    except (ProviderAgentError, ProtocolError) as err:
        console.print(f"[red]{err}[/red]")
        raise typer.Exit(2) from err
    round_seed, randomness = os.urandom(32), os.urandom(32)
    prover = PogProver(devices, chosen)
    # The bare matmul at the round's n, for the overhead ratio; also the warm-up (the first
    # matmul on a device pays for thread pools and kernels).
    dense_tflops = [benchmark_tflops(d.spec, chosen, sizes[g]) for g, d in enumerate(devices)]

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total} rows"), TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(f"PoG n={sizes[0]} on {devices[0].spec}", total=sizes[0])
        start = time.perf_counter()
        commitment = prover.commit_round(round_seed, sizes,
                                         lambda done, _total: progress.update(task, completed=done))
        seed_to_root = time.perf_counter() - start
        answers = prover.answer_round(randomness, k)

    verdicts, verify_s = [], []
    for g, (gpu, answered) in enumerate(zip(commitment.gpus, answers.gpus)):
        cpu = time.process_time()
        verdicts.append(_self_check(devices[g], round_seed, randomness, gpu.root, sizes[g], k,
                                    [(a.index, a.data, a.siblings) for a in answered.answers],
                                    2 * sizes[g] ** 3 / seed_to_root / 1e12, chosen, g))
        verify_s.append(time.process_time() - cpu)

    table = Table(title=f"Proof of GPU ({chosen}, k={k})")
    table.add_column("")
    for work in prover.work:
        table.add_column(f"gpu {work.gpu_index}", justify="right")
    rows: dict[str, list[str]] = {name: [] for name in (
        "device", "n", "bare matmul TFLOPS", "PoG TFLOPS (seed to root)", "round / bare matmul",
        "generate s", "matmul s", "commit s", "hashing s (overlapped on GPU)", "prove s",
        "verify s (verifier CPU)", "verify / seed-to-root", "class", "verdict")}
    for work, (gpu_class, failure), dense, verify in zip(prover.work, verdicts, dense_tflops,
                                                         verify_s):
        t = work.timings
        values = (f"{work.device.name} ({work.device.spec})", str(work.n), f"{dense:.3f}",
                  f"{work.tflops:.3f}", f"{dense / work.tflops:.2f}", f"{t.generate:.3f}",
                  f"{t.matmul:.3f}", f"{t.commit:.3f}", f"{t.hash_cpu:.3f}", f"{t.prove:.3f}",
                  f"{verify:.4f}", f"{verify / t.seed_to_root:.4f}", gpu_class or "-",
                  f"[red]fail: {failure}[/red]" if failure else "[green]pass[/green]")
        for column, value in zip(rows.values(), values):
            column.append(value)
    for name, values in rows.items():
        table.add_row(name, *values)
    console.print(table)
    console.print(f"seed-to-root {seed_to_root:.3f} s (all devices), verifier CPU "
                  f"{sum(verify_s):.4f} s")
    if any(failure for _, failure in verdicts):
        raise typer.Exit(1)


def _verifier_n(device: Device, dtype: str) -> int:
    """The n a verifier would assign to this device's class (never chosen by the prover)."""
    profile = lookup(device.name)
    if profile is None:
        raise ProviderAgentError(f"no GPU class for {device.name!r}; pass --n")
    return n_for(profile, dtype)


def _self_check(device: Device, round_seed: bytes, randomness: bytes, root: bytes, n: int,
                k: int, answers: list[tuple[int, bytes, tuple[bytes, ...]]], tflops: float,
                dtype: str, g: int) -> tuple[str | None, str | None]:
    """(class, None) when the answers pass as a verifier checks them, else (None, why)."""
    try:
        wanted = challenge_indices(randomness, root, n * n // 64, k)
        if [index for index, _, _ in answers] != wanted:
            return None, "answered indices are not the challenged ones"
        check_chunks(gpu_seed(round_seed, g, device.uuid_hash), n, root, answers)
        return identify(device.name, tflops, dtype).name, None
    except ProtocolError as err:
        return None, str(err)
