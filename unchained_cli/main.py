"""The `unchained` command: a thin root whose sub-commands load when named (unchained_cli/lazy.py).

Each mount function imports its command's module only when that command runs, so a command pays
for its own service's imports alone: `unchained --help` and `job status` import neither torch
nor celery nor the server's packages (docs/BENCHMARKS.md, start-up).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from unchained_cli.dev import add_dev_command, dev_help
from unchained_cli.errors import run_guarded, set_debug
from unchained_cli.lazy import Lazy, LazyGroup


def _withdraw(app: typer.Typer, name: str) -> None:
    from unchained_cli.withdraw import withdraw
    app.command(name)(withdraw)


def _balance(app: typer.Typer, name: str) -> None:
    from renter.cli import balance
    app.command(name)(balance)


def _deploy(app: typer.Typer, name: str) -> None:
    from unchained_cli.chain_cli import deploy
    app.command(name)(deploy)


def _chain(app: typer.Typer, name: str) -> None:
    from unchained_cli.chain_cli import chain_app
    app.add_typer(chain_app, name=name)


def _pog(app: typer.Typer, name: str) -> None:
    from provider_agent.cli import pog_app
    app.add_typer(pog_app, name=name)


def _provider(app: typer.Typer, name: str) -> None:
    from provider_agent.cli import provider_app
    app.add_typer(provider_app, name=name, cls=_ProviderGroup)


class _ProviderGroup(TyperGroup):
    """The provider agent's commands plus `provider list`: the offers renters shop from, which
    live in the renter's room (renter/cli.py) since services never import each other."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_command(_command_of("list", _provider_list()), "list")


def _provider_list() -> Callable[..., None]:
    from renter.cli import provider_list
    return provider_list


def _command_of(name: str, function: Callable[..., None]) -> Any:
    holder = typer.Typer()
    holder.command(name)(function)
    return typer.main.get_command(holder)


def _offers(app: typer.Typer, name: str) -> None:
    app.command(name)(_provider_list())


def _backend(app: typer.Typer, name: str) -> None:
    from backend.cli import backend_app
    app.add_typer(backend_app, name=name)


def _job(app: typer.Typer, name: str) -> None:
    from renter.cli import job_app
    app.add_typer(job_app, name=name)


def _model(app: typer.Typer, name: str) -> None:
    from renter.cli import model_app
    app.add_typer(model_app, name=name)


def _lease(app: typer.Typer, name: str) -> None:
    from renter.cli import lease_app
    app.add_typer(lease_app, name=name)


def _verifier(app: typer.Typer, name: str) -> None:
    from verifier.cli import verifier_app
    app.add_typer(verifier_app, name=name)


def _account(app: typer.Typer, name: str) -> None:
    from unchained_cli.account import account_app
    app.add_typer(account_app, name=name)


def _broker(app: typer.Typer, name: str) -> None:
    from unchained_cli.broker import broker_app
    app.add_typer(broker_app, name=name)


class RootGroup(LazyGroup):
    # The order of `unchained --help`. Each help is the first paragraph of the command's own
    # (tests/cli/test_lazy_commands.py compares them).
    entries = {
        "withdraw": Lazy("Withdraw every balance the contracts owe you (escrow, leases, challenges, stake).", _withdraw),
        "balance": Lazy("Your wallet's ETH and every balance the contracts owe you (refunds, earnings, bonds, unbonded "
                        "stake): `unchained withdraw` pays those out.", _balance),
        "up": Lazy(dev_help("up", "Start a local network for manual use: chain, contracts, broker and backend; "
                                  "print what to run next."), add_dev_command),
        "deploy": Lazy("Deploy the whole contract set and write deployments/<chainId>.json (addresses and ABIs).",
                       _deploy),
        "demo": Lazy(dev_help("demo", "Run the whole market here: chain, backend, broker, two providers (one cheats), "
                                      "verifiers, renters."), add_dev_command),
        "bench": Lazy(dev_help("bench", "Run every benchmark and rewrite docs/BENCHMARKS.md (machine, command and "
                                        "date included)."), add_dev_command),
        "chain": Lazy("A local development chain (anvil).", _chain),
        "pog": Lazy("Proof of GPU: local benchmark and self-proof.", _pog),
        "provider": Lazy("Run this machine as a marketplace provider.", _provider),
        "offers": Lazy("GPU offers to rent: verified class, TFLOPS, price, reputation, free GPUs, last seen.", _offers),
        "backend": Lazy("The marketplace backend: API, dashboard, chain indexer.", _backend),
        "job": Lazy("Renter: submit and pay for jobs, follow them, fetch verified results.", _job),
        "model": Lazy("The model hub: push and list models.", _model),
        "lease": Lazy("Renter: lease GPUs of a provider by the hour.", _lease),
        "verifier": Lazy("Verifier: stake, run Proof-of-GPU rounds, challenge and slash cheaters.", _verifier),
        "account": Lazy("Make, import and list encrypted keystores (your wallet's keys).", _account),
        "broker": Lazy("Broker users: each party reaches only its own queue's keys (Redis ACLs).", _broker),
    }


app = typer.Typer(help="Unchained: a GPU compute marketplace with on-chain settlement.", no_args_is_help=True,
                  cls=RootGroup)


@app.callback()
def root(
    ctx: typer.Context,
    config: Annotated[Optional[Path], typer.Option(
        "--config", envvar="UNCHAINED_CONFIG", dir_okay=False,
        help="TOML file whose keys mirror the flags (rpc, backend, broker, database, keystore, ...; "
             "a [\"backend serve\"] table for one command); default: ~/.unchained/config.toml if it exists. "
             "Flags win over environment variables, which win over the file.")] = None,
    debug: Annotated[bool, typer.Option("--debug", envvar="UNCHAINED_DEBUG",
                                        help="Show a traceback instead of a one-line error.")] = False,
) -> None:
    """Unchained: a GPU compute marketplace with on-chain settlement."""
    from unchained_cli.config import load_default_map

    set_debug(debug)
    if debug:
        logging.getLogger().setLevel(logging.DEBUG)
    ctx.default_map = load_default_map(ctx.command, config)  # type: ignore[arg-type]


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    # Not app(): Typer would print a pretty traceback for any exception; the boundary prints one
    # line saying what to fix instead (unchained_cli/errors.py), a traceback only with --debug.
    sys.exit(run_guarded(typer.main.get_command(app)))


if __name__ == "__main__":
    main()
