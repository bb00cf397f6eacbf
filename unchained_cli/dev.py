"""`unchained demo`, `up` and `bench`: dev tools that run the whole market on this machine.

They live in devtools/, beside this package in a source checkout, and the wheel does not ship
them. From a checkout (an editable install, or `python -m unchained_cli.main` in it) each command
is the real one, options and all; from an installed wheel each is a stand-in that accepts any
arguments and says in one line that it needs a source checkout. The root's table
(unchained_cli/main.py) names them as attributes of this module: `unchained_cli.dev.demo`, ...
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import typer
from typer._click import Command  # Typer >= 0.20 vendors Click as typer._click

from unchained_cli.errors import CliError

# Where the checkout's root is when this package runs from one (devtools/ sits beside it there).
CHECKOUT = Path(__file__).resolve().parent.parent
DEV_TOOLS = CHECKOUT / "devtools"
COMMANDS = ("up", "demo", "bench")


def dev_tools() -> ModuleType | None:
    """devtools.cli from the checkout this package runs from; None outside a checkout."""
    if not (DEV_TOOLS / "cli.py").is_file():
        return None
    # An editable install maps only the shipped packages: the checkout's root may not be on the path.
    if str(CHECKOUT) not in sys.path:
        sys.path.append(str(CHECKOUT))
    return importlib.import_module("devtools.cli")


def needs_checkout(name: str) -> Command:
    """The stand-in for dev tool command `name` outside a checkout: it takes any arguments and
    refuses in one line."""
    def command(ctx: typer.Context) -> None:
        raise CliError(f"`unchained {name}` needs a source checkout: it runs the dev tools (devtools/), which "
                       f"the installed package does not ship; clone the repository and run it there")

    command.__doc__ = f"Needs a source checkout (a dev tool, not in the installed package): unchained {name}."
    holder = typer.Typer()
    holder.command(name, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(command)
    return typer.main.get_command(holder)  # the one command itself


def dev_help(name: str, checkout_help: str) -> str:
    """The one-line help `unchained --help` lists for dev tool command `name` (without loading it):
    the real command's from a checkout, else the stand-in's."""
    if (DEV_TOOLS / "cli.py").is_file():
        return checkout_help
    doc = needs_checkout(name).help
    assert doc is not None
    return doc


def __getattr__(name: str) -> Any:
    """Dev tool command `name` (`unchained_cli.dev.up`, ...): the real one from a checkout, else
    the stand-in. Looked up only when the command is named, since it imports the dev tools."""
    if name not in COMMANDS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    tools = dev_tools()
    return getattr(tools, name) if tools is not None else needs_checkout(name)
