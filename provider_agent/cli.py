"""`unchained pog ...`: local Proof-of-GPU benchmark and self-proof (mounted by the root app).

`pog run` plays both sides on this box: the prover computes and commits on every device at
once, then the round is challenged and checked with the protocol's own rules (the same
`protocol.pog` functions a verifier runs: index derivation, inclusion and exact recomputation,
class identification), so a box can see what a verifier would decide before staking on it.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from protocol.errors import ProtocolError
from protocol.pog.challenge import MIN_K
from protocol.pog.profiles import lookup, n_for
from protocol.pog.workload import check_n
from provider_agent import ProviderAgentError
from provider_agent.gpus import Device, detect, resolve
from provider_agent.pog_local import local_round
from provider_agent.pog_prover import TORCH_DTYPES, default_dtype

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
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total} rows"), TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(f"PoG n={sizes[0]} on {devices[0].spec}", total=sizes[0])
        results = local_round(devices, sizes, chosen, k,
                              lambda done, _total: progress.update(task, completed=done))

    table = Table(title=f"Proof of GPU ({chosen}, k={k})")
    table.add_column("")
    for r in results:
        table.add_column(f"gpu {r.work.gpu_index}", justify="right")
    rows: dict[str, list[str]] = {name: [] for name in (
        "device", "n", "bare matmul TFLOPS", "PoG TFLOPS (seed to root)", "round / bare matmul",
        "generate s", "matmul s", "commit s", "hashing s (overlapped on GPU)", "prove s",
        "verify s (verifier CPU)", "verify / seed-to-root", "class", "verdict")}
    for r in results:
        work, t = r.work, r.work.timings
        values = (f"{work.device.name} ({work.device.spec})", str(work.n), f"{r.dense_tflops:.3f}",
                  f"{work.tflops:.3f}", f"{r.overhead:.2f}", f"{t.generate:.3f}",
                  f"{t.matmul:.3f}", f"{t.commit:.3f}", f"{t.hash_cpu:.3f}", f"{t.prove:.3f}",
                  f"{r.verify_s:.4f}", f"{r.verify_ratio:.4f}", r.gpu_class or "-",
                  f"[red]fail: {r.failure}[/red]" if r.failure else "[green]pass[/green]")
        for column, value in zip(rows.values(), values):
            column.append(value)
    for name, values in rows.items():
        table.add_row(name, *values)
    console.print(table)
    console.print(f"seed-to-root {results[0].seed_to_root_s:.3f} s (all devices), verifier CPU "
                  f"{sum(r.verify_s for r in results):.4f} s")
    if any(r.failure for r in results):
        raise typer.Exit(1)


def _verifier_n(device: Device, dtype: str) -> int:
    """The n a verifier would assign to this device's class (never chosen by the prover)."""
    profile = lookup(device.name)
    if profile is None:
        raise ProviderAgentError(f"no GPU class for {device.name!r}; pass --n")
    return n_for(profile, dtype)
