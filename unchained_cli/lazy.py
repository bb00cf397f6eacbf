"""The root command's sub-commands load when named, not at start.

Each service's sub-app imports its service (web3, torch, celery, the server's packages): mounting
them all at start made every command, `--help` included, pay for all of them (3-14 s on a 2-core
machine). The root group holds a `Lazy` per name instead: the module is imported the first time
Click asks for the command by name (running it, its `--help`, shell completion, a config file's
check of every flag). The root's own `--help` lists each one from the one-line help written here,
which tests/cli/test_lazy_commands.py holds equal to the loaded command's.

The commands are one table (`RootGroup.entries`, unchained_cli/main.py): a name, its one-line help,
and the module and attribute that hold it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import typer
from typer._click import Command  # Typer >= 0.20 vendors Click as typer._click
from typer.core import TyperCommand

from unchained_cli.errors import GuardedGroup


@dataclass(frozen=True)
class Lazy:
    """A sub-command: its one-line help for the root's listing, and where it is: attribute
    `attribute` of module `module`, imported when the command is first named. The attribute is a
    Typer app (a group of commands), a function (one command, as `app.command()` takes it), or a
    ready Click command (named as it is listed)."""

    help: str
    module: str
    attribute: str

    def load(self, name: str) -> Any:
        target = getattr(importlib.import_module(self.module), self.attribute)
        if isinstance(target, Command):
            return target
        holder = typer.Typer()
        holder.callback()(_no_options)  # a callback keeps the holder a group even with one command
        if isinstance(target, typer.Typer):
            holder.add_typer(target, name=name)
        else:
            holder.command(name)(target)
        return typer.main.get_command(holder).commands[name]  # type: ignore[attr-defined]


def _no_options() -> None:
    pass


class LazyCommands(MutableMapping[str, Any]):
    """Click's `group.commands`, loading each entry on first access; iterates in listing order."""

    def __init__(self, entries: Mapping[str, Lazy], loaded: Mapping[str, Any]) -> None:
        self.entries = entries
        self.loaded: dict[str, Any] = dict(loaded)

    def __getitem__(self, name: str) -> Any:
        if name not in self.loaded:
            self.loaded[name] = self.entries[name].load(name)  # KeyError for an unknown name, as a dict
        return self.loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("the root's commands are fixed")

    def __iter__(self) -> Iterator[str]:
        yield from self.entries
        yield from (name for name in self.loaded if name not in self.entries)

    def __len__(self) -> int:
        return len(self.entries) + sum(1 for name in self.loaded if name not in self.entries)

    def __contains__(self, name: object) -> bool:
        return name in self.entries or name in self.loaded


class LazyGroup(GuardedGroup):
    """The root group over `entries` (a subclass sets them). While it writes its own help it lists
    the commands not loaded yet from their `Lazy.help`, so `unchained --help` imports none."""

    entries: Mapping[str, Lazy] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(self.entries, self.commands)
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names only: TyperGroup's reads every command

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        commands = self.commands
        assert isinstance(commands, LazyCommands)
        if self._listing and cmd_name in commands.entries and cmd_name not in commands.loaded:
            return TyperCommand(cmd_name, help=commands.entries[cmd_name].help)
        return commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False
