"""The `unchained` command: a thin root whose sub-commands load when named (unchained_cli/lazy.py).

Each command's module is imported only when that command runs, so a command pays for its own
service's imports alone: `unchained --help` and `job status` import neither torch nor celery nor
the server's packages (docs/BENCHMARKS.md, start-up).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from unchained_cli.dev import dev_help
from unchained_cli.errors import run_guarded, set_debug
from unchained_cli.lazy import Lazy, LazyGroup


class RootGroup(LazyGroup):
    # The commands: name, one-line help, and the module and attribute that hold each (a Typer app,
    # a command function or a Click command). The order is that of `unchained --help`. Each help
    # is the first paragraph of the command's own (tests/cli/test_lazy_commands.py compares them).
    entries = {
        "withdraw": Lazy("Withdraw every balance the contracts owe you (escrow, leases, challenges, stake).",
                         "unchained_cli.withdraw", "withdraw"),
        "balance": Lazy("Your wallet's ETH and every balance the contracts owe you (refunds, earnings, bonds, unbonded "
                        "stake): `unchained withdraw` pays those out.", "renter.cli", "balance"),
        "up": Lazy(dev_help("up", "Start a local network for manual use: chain, contracts, broker and backend; "
                                  "print what to run next."), "unchained_cli.dev", "up"),
        "deploy": Lazy("Deploy the whole contract set and write deployments/<chainId>.json (addresses and ABIs).",
                       "unchained_cli.chain_cli", "deploy"),
        "demo": Lazy(dev_help("demo", "Run the whole market here: chain, backend, broker, two providers (one cheats), "
                                      "verifiers, renters."), "unchained_cli.dev", "demo"),
        "bench": Lazy(dev_help("bench", "Run every benchmark and rewrite docs/BENCHMARKS.md (machine, command and "
                                        "date included)."), "unchained_cli.dev", "bench"),
        "chain": Lazy("A local development chain (anvil).", "unchained_cli.chain_cli", "chain_app"),
        "pog": Lazy("Proof of GPU: local benchmark and self-proof.", "provider_agent.cli", "pog_app"),
        "provider": Lazy("Run this machine as a marketplace provider.", "unchained_cli.provider_group", "provider"),
        "offers": Lazy("GPU offers to rent: verified class, TFLOPS, price, reputation, free GPUs, last seen.",
                       "renter.cli", "provider_list"),
        "backend": Lazy("The marketplace backend: API, dashboard, chain indexer.", "backend.cli", "backend_app"),
        "job": Lazy("Renter: submit and pay for jobs, follow them, fetch verified results.", "renter.cli", "job_app"),
        "model": Lazy("The model hub: push and list models.", "renter.cli", "model_app"),
        "lease": Lazy("Renter: lease GPUs of a provider by the hour.", "renter.cli", "lease_app"),
        "verifier": Lazy("Verifier: stake, run Proof-of-GPU rounds, challenge and slash cheaters.",
                         "verifier.cli", "verifier_app"),
        "account": Lazy("Make, import and list encrypted keystores (your wallet's keys).",
                        "unchained_cli.account", "account_app"),
        "broker": Lazy("Broker users: each party reaches only its own queue's keys (Redis ACLs).",
                       "unchained_cli.broker", "broker_app"),
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
    ctx.default_map = load_default_map(ctx.command, config)


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    # Not app(): Typer would print a pretty traceback for any exception; the boundary prints one
    # line saying what to fix instead (unchained_cli/errors.py), a traceback only with --debug.
    sys.exit(run_guarded(typer.main.get_command(app)))


if __name__ == "__main__":
    main()
