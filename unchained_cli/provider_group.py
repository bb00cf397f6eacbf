"""`unchained provider`: the agent's commands (provider_agent/cli.py) and `provider list`, the
offers renters shop from, which live in the renter's room (renter/cli.py). Services never import
each other, so the CLI layer joins the two under one name."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from provider_agent.cli import provider_app
from renter.cli import provider_list


def _group() -> TyperGroup:
    group = typer.main.get_command(provider_app)
    if not isinstance(group, TyperGroup):  # provider_app has several commands: Typer makes a group
        raise TypeError(f"provider_app made a {type(group).__name__}, not a group")
    holder = typer.Typer()
    holder.command("list")(provider_list)  # one command and no callback: Typer returns it alone
    group.add_command(typer.main.get_command(holder), "list")
    return group


provider = _group()
