"""The dev tools' commands: `unchained demo`, `up` and `bench` (mounted by unchained_cli.dev when
this checkout is there)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from devtools.up import up
from unchained_cli.errors import BadOption

console = Console()


def demo(
    data_dir: Annotated[Optional[Path], typer.Option(help="Where the market keeps its chain files, "
                                                         "database, keystores and logs; default: a new temp dir.")] = None,
    broker: Annotated[Optional[str], typer.Option(help="Celery broker URL; default: a private redis-server "
                                                       "if installed, else SQLite (sqla+sqlite:///).")] = None,
) -> None:
    """Run the whole market here: chain, backend, broker, two providers (one cheats), verifiers, renters."""
    import dataclasses
    import signal

    from devtools.demo import DEMO_PLAN, run

    def interrupted(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    from protocol.tasks import BadBrokerUrl, result_backend_url

    if broker:
        try:
            result_backend_url(broker)  # the services would refuse it later, one by one
        except BadBrokerUrl as exc:
            raise BadOption("--broker", str(exc)) from exc
    signal.signal(signal.SIGTERM, interrupted)
    plan = dataclasses.replace(DEMO_PLAN, broker_url=broker) if broker else DEMO_PLAN
    try:
        run(console, data_dir, plan)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: every process the demo started is stopped[/yellow]")
        raise typer.Exit(130) from None


def bench(
    only: Annotated[Optional[list[str]], typer.Option(help="Run and print only these sections (gas, pog, dispatch, renter, colocation, startup, gpu, load); the file is left as it is.")] = None,
    jobs: Annotated[int, typer.Option(min=1, help="Load section: jobs in all (a multiple of --renters).")] = 200,
    renters: Annotated[int, typer.Option(min=1, help="Load section: renter wallets submitting at once.")] = 20,
    providers: Annotated[int, typer.Option(min=1, help="Load section: provider agents.")] = 5,
    items: Annotated[int, typer.Option(min=1, help="Load section: items per job.")] = 4,
) -> None:
    """Run every benchmark and rewrite docs/BENCHMARKS.md (machine, command and date included)."""
    from devtools.bench import BENCHMARKS_MD, run
    from devtools.bench_load import Load

    if jobs % renters:
        raise BadOption("--jobs", f"{jobs} jobs do not split evenly over {renters} renters")
    load = Load(providers=providers, renters=renters, jobs_per_renter=jobs // renters, items_per_job=items)
    try:
        with console.status("running benchmarks"):
            text = run(only, load=load)
    except ValueError as exc:  # a section name bench does not know
        raise BadOption("--only", str(exc)) from exc
    console.print(text, markup=False, soft_wrap=True)  # markdown tables, never wrapped
    if not only:
        console.print(f"wrote {BENCHMARKS_MD}")


__all__ = ["bench", "demo", "up"]
