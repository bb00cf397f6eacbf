"""`unchained pog ...`: local Proof-of-GPU benchmark and self-proof (mounted by the root app).

`pog run` plays both sides on this box: the prover computes and commits on every device at
once, then the round is challenged and checked with the protocol's own rules (the same
`protocol.pog` functions a verifier runs: index derivation, inclusion and exact recomputation,
class identification), so a box can see what a verifier would decide before staking on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from client.cli_output import Output, OutputFormat, print_json
from client.keystore import PASSWORD_FILE_HELP
from protocol.errors import ProtocolError
from protocol.pog.challenge import MIN_K
from provider_agent import ProviderAgentError

if TYPE_CHECKING:
    from provider_agent.gpus import Device
    from provider_agent.pog_local import LocalRoundResult

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
    dtype: Annotated[str | None, typer.Option(help="int8, fp32, fp16 or bf16; default: fp32 "
                                                   "on CPU, int8 on GPU.")] = None,
) -> None:
    """Generate, multiply, commit, self-challenge and verify; print TFLOPS, time split, class."""
    # Imported here: they load torch (about 2 s), which no other command of the CLI needs.
    from provider_agent.gpus import detect, resolve
    from provider_agent.keccak_native import require_native
    from provider_agent.pog_local import local_round
    from provider_agent.pog_prover import TORCH_DTYPES, default_dtype
    from protocol.pog.workload import check_n  # numpy: only this command needs it

    require_native()  # before minutes of matmul: a slow hasher would understate the device
    try:
        devices = [resolve(device)] if device else detect()
    except ProviderAgentError as err:
        if device is None:
            raise
        raise typer.BadParameter(str(err), param_hint="--device") from err
    chosen = dtype or default_dtype(devices[0])
    if chosen not in TORCH_DTYPES:
        raise typer.BadParameter(f"{chosen!r} is not one of {sorted(TORCH_DTYPES)}", param_hint="--dtype")
    try:
        sizes = {g: check_n(n) if n else _verifier_n(d, chosen) for g, d in enumerate(devices)}
    except ProtocolError as err:
        raise typer.BadParameter(str(err), param_hint="--n") from err
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
        "verify s (verifier CPU)", "verify / seed-to-root", "residency probe s", "class",
        "devices proven", "verdict")}
    for r in results:
        work, t = r.work, r.work.timings
        values = (f"{work.device.name} ({work.device.spec})", str(work.n), f"{r.dense_tflops:.3f}",
                  f"{work.tflops:.3f}", f"{r.overhead:.2f}", f"{t.generate:.3f}",
                  f"{t.matmul:.3f}", f"{t.commit:.3f}", f"{t.hash_cpu:.3f}", f"{t.prove:.3f}",
                  f"{r.verify_s:.4f}", f"{r.verify_ratio:.4f}", _probe_cell(r), _class_cell(r),
                  f"{r.proven_devices} of {len(results)}",
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


def _probe_cell(result: LocalRoundResult) -> str:
    """How long every device's probe answers took and whether this fill counted."""
    if result.probe_s is None:
        return "-"
    return f"{result.probe_s:.3f} ({'resident' if result.resident else 'not resident'})"


def _class_cell(result: LocalRoundResult) -> str:
    """The class a verifier would name, or why it would name none (the work still passes)."""
    if result.gpu_class:
        return result.gpu_class
    if result.unidentified:
        return f"[yellow]unidentified: {result.unidentified}[/yellow]"
    return "-"


def _verifier_n(device: Device, dtype: str) -> int:
    """The n a verifier would assign to this device's class (never chosen by the prover)."""
    from protocol.pog.profiles import lookup, n_for

    profile = lookup(device.name)
    if profile is None:
        raise ProviderAgentError(f"no GPU class for {device.name!r}; pass --n")
    return n_for(profile, dtype)


# -- `unchained provider ...` -------------------------------------------------------------------

provider_app = typer.Typer(help="Run this machine as a marketplace provider.", no_args_is_help=True)
DEFAULT_METRICS_PORT = 9108
PasswordFile = Annotated[Path | None, typer.Option("--password-file", dir_okay=False, help=PASSWORD_FILE_HELP)]


@provider_app.callback()
def provider() -> None:
    """Run this machine as a marketplace provider."""


Rpc = Annotated[str | None, typer.Option(
    "--rpc", envvar="UNCHAINED_PROVIDER_RPC_URL", help="JSON-RPC URL of the chain; default: http://127.0.0.1:8545.")]
BackendUrl = Annotated[str | None, typer.Option(
    "--backend", envvar="UNCHAINED_PROVIDER_BACKEND_URL",
    help="Backend URL (content, output uploads, reports); default: none (content from --content-dir).")]
DeploymentFile = Annotated[Path | None, typer.Option(
    "--deployment", dir_okay=False, help="deployments/<chainId>.json; default: ./deployments/<chainId>.json.")]


def _per_network_data_dir(rpc_url: str) -> Path:
    """~/.unchained/<chainId>/provider: one directory per network (asks the node its chain id,
    which also checks that it answers before anything is signed)."""
    from web3 import Web3

    chain_id = Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": 10})).eth.chain_id
    return Path.home() / ".unchained" / str(chain_id) / "provider"


@provider_app.command("run")
def provider_run(
    rpc: Rpc = None,
    keystore: Annotated[Path | None, typer.Option(help="The provider's eth-account JSON keystore.")] = None,
    password_file: PasswordFile = None,
    broker: Annotated[str | None, typer.Option(
        envvar="UNCHAINED_PROVIDER_BROKER_URL",
        help="Celery broker URL (redis://... or sqla+sqlite:///FILE); default: redis://127.0.0.1:6379/0.")] = None,
    backend: BackendUrl = None,
    deployment: DeploymentFile = None,
    content_dir: Annotated[Path | None, typer.Option(help="Read content by hash from this directory "
                                                          "instead of the backend.")] = None,
    data_dir: Annotated[Path | None, typer.Option(
        envvar="UNCHAINED_PROVIDER_DATA_DIR",
        help="Cache, outputs and local records; default: ~/.unchained/<chainId>/provider.")] = None,
    mining: Annotated[bool | None, typer.Option("--mining/--no-mining", help="Mine when idle.")] = None,
    metrics_port: Annotated[int, typer.Option(help="Port of /metrics and /status (0: any free port).")] = DEFAULT_METRICS_PORT,
) -> None:
    """Register if needed, mine when idle, and take jobs and PoG work from this provider's queue."""
    from client.keystore import load_keystore
    from provider_agent import service
    from provider_agent.agent import Agent, use_agent
    from provider_agent.settings import Settings

    flags = dict(rpc_url=rpc, keystore=keystore, password_file=password_file, broker_url=broker, backend_url=backend,
                 content_dir=content_dir, data_dir=data_dir, mining=mining, metrics_port=metrics_port,
                 deployment_file=deployment)
    settings = Settings.from_env(**flags)  # flags over UNCHAINED_PROVIDER_* variables
    if data_dir is None:
        settings = Settings.from_env(**{**flags, "data_dir": _per_network_data_dir(settings.rpc_url)})
    if settings.keystore is None:
        raise typer.BadParameter("required (or UNCHAINED_PROVIDER_KEYSTORE)", param_hint="--keystore")
    from client.instance_lock import InstanceLock
    from client.queue_claim import QueueClaim
    from protocol.broker import provider_keyprefix
    from protocol.tasks import provider_queue
    from provider_agent.metrics import MetricsServer
    from provider_agent.preflight import check_services

    # One agent per data directory (its records, cache and nonces are not shared), then the port,
    # bound now: both said before any key is opened or wei staked.
    with InstanceLock(settings.data_dir, "provider agent"), MetricsServer(metrics_port) as metrics:
        check_services(settings.broker_url, settings.backend_url)
        # Opened here, once (a prompt at most); the worker's tasks share this agent, so the
        # password is never handed on through the environment.
        agent = use_agent(Agent.build(settings, load_keystore(settings.keystore, settings.password_file)))
        # One agent per key too, across machines (the lock above sees one directory): before any wei is staked.
        address = agent.chain.address
        with QueueClaim(settings.broker_url, provider_keyprefix(address), provider_queue(address), settings.data_dir,
                        4 * settings.heartbeat_s):
            service.run(agent, metrics, console.print)


@provider_app.command("status")
def provider_status(
    url: Annotated[str, typer.Option(help="The running agent's status URL.")] =
        f"http://127.0.0.1:{DEFAULT_METRICS_PORT}/status",
    output: Output = OutputFormat.text,
) -> None:
    """GPUs, PoG class, jobs, hash rate and earnings of the running agent (a Rich table)."""
    import httpx

    from client.units import eth

    try:
        status = httpx.get(url, timeout=10).raise_for_status().json()
    except httpx.HTTPError as err:  # not the backend's advice: the agent's own status port is meant
        raise ProviderAgentError(f"no running agent answers at {url}: {err}") from None
    if output is OutputFormat.json:  # the agent's document, its amounts in wei as strings like every read's
        print_json({**status, "stake_wei": str(status["stake_wei"]),
                    "earnings_owed_wei": str(status["earnings_owed_wei"])})
        return
    table = Table(title=f"provider {status['address']}")
    table.add_column("")
    table.add_column("value", justify="right")
    rows = [
        ("registered / active", f"{status['registered']} / {status['active']}"),
        ("stake", eth(status["stake_wei"])),
        ("devices", ", ".join(f"{spec} ({name})" for spec, name in status["devices"])),
        ("PoG class", f"{status['pog_class'] or '-'} ({'passed' if status['pog_passed'] else 'not passed'})"),
        ("jobs running", str(status["jobs"]["running"])),
        ("jobs signed, commit queued", str(status["jobs"]["signed"])),
        ("jobs committed / finalized / failed / refunded",
         f"{status['jobs']['committed']} / {status['jobs']['finalized']} / {status['jobs']['failed']} / "
         f"{status['jobs']['refunded']}"),
        ("job throughput (items/s)", f"{status['items_per_s']:.2f}"),
        ("mining", status["mining_state"]),
        ("hash rate (H/s)", f"{status['hashrate']:,.0f}"),
        ("shares found", str(status["shares"])),
        ("earnings to withdraw", eth(status["earnings_owed_wei"])),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


@provider_app.command("leave")
def provider_leave(
    rpc: Rpc = None,
    keystore: Annotated[Path | None, typer.Option(help="The provider's eth-account JSON keystore.")] = None,
    password_file: PasswordFile = None,
    backend: BackendUrl = None,
    deployment: DeploymentFile = None,
) -> None:
    """Leave the market cleanly: deactivate, withdraw earnings, start unbonding the stake."""
    import time

    from client.units import eth, when
    from provider_agent.agent import Agent
    from provider_agent.settings import Settings

    agent = Agent.build(Settings.from_env(rpc_url=rpc, keystore=keystore, password_file=password_file,
                                          backend_url=backend, mining=False, deployment_file=deployment))
    withdrawn = agent.leave()  # commits signed results first: their commits are promised
    unbonding = agent.chain.contract("Staking").functions.unbondingOf(agent.chain.address).call()
    console.print(f"withdrew {eth(withdrawn)}; {eth(unbonding.amount)} unbonding until "
                  f"{when(unbonding.releaseAt, time.time())} "
                  "(`unchained withdraw` pays it out then)", highlight=False)
