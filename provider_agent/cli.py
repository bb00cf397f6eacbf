"""`unchained pog ...`: local Proof-of-GPU benchmark and self-proof (mounted by the root app).

`pog run` plays both sides on this box: the prover computes and commits on every device at
once, then the round is challenged and checked with the protocol's own rules (the same
`protocol.pog` functions a verifier runs: index derivation, inclusion and exact recomputation,
class identification), so a box can see what a verifier would decide before staking on it.
"""

from __future__ import annotations

from pathlib import Path
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


# -- `unchained provider ...` -------------------------------------------------------------------

provider_app = typer.Typer(help="Run this machine as a marketplace provider.", no_args_is_help=True)
DEFAULT_METRICS_PORT = 9108


@provider_app.callback()
def provider() -> None:
    """Run this machine as a marketplace provider."""


def _export(**options: object) -> None:
    """CLI options become UNCHAINED_PROVIDER_* variables, so the worker's lazily built settings
    (and any process it starts) see exactly what was given here."""
    import os

    from provider_agent.settings import ENV_PREFIX, get_settings

    for name, value in options.items():
        if value is not None:
            os.environ[ENV_PREFIX + name.upper()] = str(value)
    get_settings.cache_clear()


@provider_app.command("run")
def provider_run(
    rpc: Annotated[str | None, typer.Option(help="JSON-RPC URL of the chain.")] = None,
    keystore: Annotated[Path | None, typer.Option(help="The provider's eth-account JSON keystore.")] = None,
    broker: Annotated[str | None, typer.Option(help="Celery broker URL (redis://...).")] = None,
    backend: Annotated[str | None, typer.Option(help="Backend URL (content, output uploads, reports).")] = None,
    content_dir: Annotated[Path | None, typer.Option(help="Read content by hash from this directory "
                                                          "instead of the backend.")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Cache, outputs and local records.")] = None,
    mining: Annotated[bool | None, typer.Option("--mining/--no-mining", help="Mine when idle.")] = None,
    metrics_port: Annotated[int, typer.Option(help="Port of /metrics and /status.")] = DEFAULT_METRICS_PORT,
) -> None:
    """Register if needed, mine when idle, and take jobs and PoG work from this provider's queue."""
    import getpass
    import os
    import threading
    import time

    from protocol.tasks import provider_queue
    from provider_agent.agent import get_agent
    from provider_agent.metrics import MetricsServer
    from provider_agent.settings import ENV_PREFIX, get_settings
    from provider_agent.worker import app as celery_app

    _export(rpc_url=rpc, keystore=keystore, broker_url=broker, backend_url=backend, content_dir=content_dir,
            data_dir=data_dir, mining=mining, metrics_port=metrics_port)
    settings = get_settings()
    if settings.keystore is None:
        console.print("[red]--keystore (or UNCHAINED_PROVIDER_KEYSTORE) is required[/red]")
        raise typer.Exit(2)
    if settings.keystore_password is None:
        os.environ[ENV_PREFIX + "KEYSTORE_PASSWORD"] = getpass.getpass(f"password for {settings.keystore}: ")
        get_settings.cache_clear()
    try:
        from provider_agent.preflight import check_services

        check_services(settings.broker_url, settings.backend_url)  # before any key is opened or wei staked
        agent = get_agent()
        if agent.register():
            console.print(f"registered {agent.chain.address} with {len(agent.devices)} device(s)")
    except ProviderAgentError as err:
        console.print(f"[red]{err}[/red]")
        raise typer.Exit(1) from err
    queue = provider_queue(agent.chain.address)
    if agent.mining is not None:
        agent.mining.start()
    metrics = MetricsServer(agent.status, lambda: agent.mining.telemetry.switches if agent.mining else [],
                            metrics_port).start()
    stop = threading.Event()
    agent.beat()  # at once: the backend offers this provider from now on

    def heartbeat() -> None:
        # Challenges must be answered before their deadlines; refunds for failed jobs fall due
        # at their deadlines, payment for committed ones at the end of their challenge windows;
        # the yield floor follows the miner, published less often (each time is a transaction).
        published_at = float("-inf")
        while not stop.wait(settings.heartbeat_s):
            agent.beat()
            try:
                agent.answer_open_challenges()
                agent.jobs.refund_failed()
                agent.jobs.finalize_due()
                if time.monotonic() - published_at >= settings.yield_publish_s:
                    agent.publish_yield()
                    published_at = time.monotonic()
            except ProviderAgentError as err:
                console.print(f"[yellow]heartbeat: {err}[/yellow]")
            except Exception as err:  # the next beat may succeed (node back, nonce freed): never let the thread die
                console.print(f"[yellow]heartbeat failed, retrying next beat: {type(err).__name__}: {err}[/yellow]")

    threading.Thread(target=heartbeat, name="heartbeat", daemon=True).start()
    console.print(f"provider {agent.chain.address}: queue {queue}, metrics on :{metrics.port}")
    try:
        celery_app.Worker(queues=[queue], pool="solo", concurrency=1, without_gossip=True,
                          without_mingle=True, loglevel="INFO").start()
    finally:
        stop.set()
        metrics.stop()
        if agent.mining is not None:
            agent.mining.stop()


@provider_app.command("status")
def provider_status(
    url: Annotated[str, typer.Option(help="The running agent's status URL.")] =
        f"http://127.0.0.1:{DEFAULT_METRICS_PORT}/status",
) -> None:
    """GPUs, PoG class, jobs, hash rate and earnings of the running agent (a Rich table)."""
    import httpx

    try:
        status = httpx.get(url, timeout=10).raise_for_status().json()
    except httpx.HTTPError as err:
        console.print(f"[red]no running agent answers at {url}: {err}[/red]")
        raise typer.Exit(1) from err
    table = Table(title=f"provider {status['address']}")
    table.add_column("")
    table.add_column("value", justify="right")
    rows = [
        ("registered / active", f"{status['registered']} / {status['active']}"),
        ("stake (ETH)", f"{status['stake_wei'] / 1e18:,.4f}"),
        ("devices", ", ".join(f"{spec} ({name})" for spec, name in status["devices"])),
        ("PoG class", f"{status['pog_class'] or '-'} ({'passed' if status['pog_passed'] else 'not passed'})"),
        ("jobs running", str(status["jobs"]["running"])),
        ("jobs committed / finalized / failed / refunded",
         f"{status['jobs']['committed']} / {status['jobs']['finalized']} / {status['jobs']['failed']} / "
         f"{status['jobs']['refunded']}"),
        ("job throughput (items/s)", f"{status['items_per_s']:.2f}"),
        ("mining", status["mining_state"]),
        ("hash rate (H/s)", f"{status['hashrate']:,.0f}"),
        ("shares found", str(status["shares"])),
        ("earnings to withdraw (ETH)", f"{status['earnings_owed_wei'] / 1e18:,.6f}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


@provider_app.command("leave")
def provider_leave(
    rpc: Annotated[str | None, typer.Option(help="JSON-RPC URL of the chain.")] = None,
    keystore: Annotated[Path | None, typer.Option(help="The provider's eth-account JSON keystore.")] = None,
) -> None:
    """Leave the market cleanly: deactivate, withdraw earnings, start unbonding the stake."""
    from provider_agent.agent import get_agent

    _export(rpc_url=rpc, keystore=keystore, mining=False)
    try:
        agent = get_agent()
        withdrawn = agent.chain.withdraw_all()
        agent.chain.leave()
    except ProviderAgentError as err:
        console.print(f"[red]{err}[/red]")
        raise typer.Exit(1) from err
    amount, release = agent.chain.contract("Staking").functions.unbondingOf(agent.chain.address).call()
    console.print(f"withdrew {withdrawn / 1e18:.6f} ETH; {amount / 1e18:.4f} ETH unbonding until {release}")
