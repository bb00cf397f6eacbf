"""The root's sub-commands load when named (unchained_cli/lazy.py): `unchained --help` imports
none of them yet lists each with its own one-line help, and every command is there when used."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import typer
from typer.testing import CliRunner

from unchained_cli.main import RootGroup, app

REPO = Path(__file__).resolve().parents[2]
SUB_APPS = ("renter.cli", "provider_agent.cli", "backend.cli", "verifier.cli", "unchained_cli.withdraw",
            "unchained_cli.chain_cli", "unchained_cli.account", "unchained_cli.broker", "devtools.cli")


def test_each_listed_help_is_the_commands_own() -> None:
    root = typer.main.get_command(app)
    assert isinstance(root, RootGroup)
    for name, entry in RootGroup.entries.items():
        command = root.commands[name]  # loads it
        own = command.short_help or command.help or ""
        assert " ".join(own.split("\n\n")[0].split()) == entry.help, name


def test_the_roots_help_imports_no_sub_app() -> None:
    probe = ("import sys\nfrom unchained_cli.main import main\nsys.argv = ['unchained', '--help']\n"
             "try:\n    main()\nfinally:\n"
             f"    print('loaded:', [m for m in {SUB_APPS!r} if m in sys.modules], file=sys.stderr)\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "loaded: []" in result.stderr
    for name, entry in RootGroup.entries.items():
        assert name in result.stdout and entry.help.split()[0] in result.stdout


def test_a_named_command_loads_and_a_typo_is_answered_with_the_lazy_names() -> None:
    runner = CliRunner()
    job = runner.invoke(app, ["job", "--help"], terminal_width=120)
    assert job.exit_code == 0 and "Usage: root job" in job.output and "submit" in job.output
    typo = runner.invoke(app, ["lese"], terminal_width=120)
    assert typo.exit_code == 2 and "Did you mean 'lease'?" in typo.output


SOMEONE = "0x" + "11" * 20
CLOSED = "http://127.0.0.1:1"  # nothing listens: the read fails at once, after its imports
# What a command may not import: each costs a quarter to half a second of start-up on these
# machines (devtools/bench_startup.py), for nothing when the command does not compute with it.
LIGHT_COMMANDS = {
    ("--help",): ("web3", "numpy", "torch"),
    ("provider", "--help"): ("web3", "numpy", "torch"),
    ("balance", "--address", SOMEONE, "--rpc", CLOSED): ("web3", "numpy", "torch"),
    ("lease", "status", "1", "--backend", CLOSED, "--rpc", CLOSED): ("numpy", "torch"),
    ("lease", "list", "--address", SOMEONE, "--backend", CLOSED, "--rpc", CLOSED): ("web3", "numpy", "torch"),
    ("job", "list", "--address", SOMEONE, "--backend", CLOSED): ("web3", "numpy", "torch"),
    ("job", "status", "1", "--backend", CLOSED): ("numpy", "torch"),
    ("model", "list", "--backend", CLOSED): ("web3", "numpy", "torch"),
}


def test_read_commands_import_nothing_they_do_not_use() -> None:
    heavy = sorted({m for modules in LIGHT_COMMANDS.values() for m in modules})
    loaded = {}
    for argv, forbidden in LIGHT_COMMANDS.items():
        probe = ("import sys\nfrom unchained_cli.main import main\n"
                 f"sys.argv = ['unchained', *{list(argv)!r}]\n"
                 "try:\n    main()\nexcept SystemExit:\n    pass\nfinally:\n"
                 f"    print('loaded:', [m for m in {heavy!r} if m in sys.modules], file=sys.stderr)\n")
        result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
        [line] = [x for x in result.stderr.splitlines() if x.startswith("loaded: ")]
        loaded[" ".join(argv)] = sorted(set(ast.literal_eval(line.removeprefix("loaded: "))) & set(forbidden))
    assert loaded == {" ".join(argv): [] for argv in LIGHT_COMMANDS}


# Commands that change something or run a service: no `-o json` to ask of them. A new command is
# either listed here or a read, which scripts read with `-o json`.
NOT_READS = {"withdraw", "up", "deploy", "demo", "bench", "chain up", "pog run", "provider run", "provider leave",
             "backend serve", "backend index", "backend rebuild", "job submit", "job challenge", "job refund",
             "job slash", "model push", "lease start", "lease ssh", "lease stop", "verifier run", "verifier leave",
             "account new", "account import", "broker grant", "broker revoke"}


def test_every_read_command_has_json_output() -> None:
    root = typer.main.get_command(app)
    assert isinstance(root, RootGroup)

    def leaves(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
        subs = root.commands if command is root else getattr(command, "commands", {})
        if not subs:
            yield path, command
        for name in ([*RootGroup.entries] if command is root else sorted(subs)):
            yield from leaves(subs[name], f"{path} {name}".strip())

    found = dict(leaves(root, ""))
    assert NOT_READS <= set(found), NOT_READS - set(found)
    without = [path for path, command in found.items() if path not in NOT_READS
               and not {"-o", "--output"} <= {o for p in command.params for o in getattr(p, "opts", [])}]
    assert without == []
