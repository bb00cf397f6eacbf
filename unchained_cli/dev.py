"""`unchained demo`, `up` and `bench`: dev tools that run the whole market on this machine.

They live in devtools/, beside this package in a source checkout, and the wheel does not ship
them. From a checkout (an editable install, or `python -m unchained_cli.main` in it) each command
is the real one, options and all; from an installed wheel each is a stand-in that accepts any
arguments and says in one line that it needs a source checkout.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import typer

from unchained_cli.errors import CliError

# Where the checkout's root is when this package runs from one (devtools/ sits beside it there).
CHECKOUT = Path(__file__).resolve().parent.parent
DEV_TOOLS = CHECKOUT / "devtools"


def dev_tools() -> ModuleType | None:
    """devtools.cli from the checkout this package runs from; None outside a checkout."""
    if not (DEV_TOOLS / "cli.py").is_file():
        return None
    # An editable install maps only the shipped packages: the checkout's root may not be on the path.
    if str(CHECKOUT) not in sys.path:
        sys.path.append(str(CHECKOUT))
    return importlib.import_module("devtools.cli")


def needs_checkout(name: str) -> Callable[[typer.Context], None]:
    def command(ctx: typer.Context) -> None:
        raise CliError(f"`unchained {name}` needs a source checkout: it runs the dev tools (devtools/), which "
                       f"the installed package does not ship; clone the repository and run it there")

    command.__doc__ = f"Needs a source checkout (a dev tool, not in the installed package): unchained {name}."
    return command


def dev_help(name: str, checkout_help: str) -> str:
    """The one-line help `unchained --help` lists for dev tool command `name` (without loading it):
    the real command's from a checkout, else the stand-in's."""
    if (DEV_TOOLS / "cli.py").is_file():
        return checkout_help
    doc = needs_checkout(name).__doc__
    assert doc is not None
    return doc


def add_dev_command(app: typer.Typer, name: str) -> None:
    """Mount dev tool command `name` on `app`: the real one from a checkout, else the stand-in."""
    tools = dev_tools()
    if tools is not None:
        app.command(name)(getattr(tools, name))
    else:
        app.command(name, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
            needs_checkout(name))
