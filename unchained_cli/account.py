"""`unchained account new|import|list`: encrypted eth-account keystores for every party.

Every command that signs takes `--keystore FILE` and `--password-file FILE` (or the file named
by UNCHAINED_PASSWORD_FILE, or a prompt): the one password story of `client.keystore`.
Keystores made here live in `--dir` (default ~/.unchained/keystores) as `<address>.json`.
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from client.cli_output import Output, OutputFormat, print_json
from client.keystore import (PASSWORD_FILE_ENV, default_keystore_dir, get_password, import_keystore,
                             list_keystores, new_keystore, parse_private_key)
from unchained_cli.errors import BadOption

account_app = typer.Typer(help="Make, import and list encrypted keystores (your wallet's keys).",
                          no_args_is_help=True)

Directory = Annotated[Optional[Path], typer.Option("--dir", file_okay=False,
                                                   help="Keystore directory; default: ~/.unchained/keystores.")]
NewPasswordFile = Annotated[Optional[Path], typer.Option(
    "--password-file", dir_okay=False,
    help=f"File whose first line is the new keystore's password; default: the file named by ${PASSWORD_FILE_ENV}, "
         "else a prompt (asked twice).")]


def _shown(address: str, path: Path) -> None:
    # Plain lines, never a table: an address or a path cut at the terminal's width cannot be copied.
    typer.echo(f"address  {address}")
    typer.echo(f"keystore {path}")


@account_app.callback()
def account() -> None:
    """Make, import and list encrypted keystores (your wallet's keys)."""


@account_app.command("new")
def account_new(directory: Directory = None, password_file: NewPasswordFile = None) -> None:
    """Create a new random key, encrypted with a password, and print its address and file."""
    where = directory or default_keystore_dir()
    entry = new_keystore(where, get_password("the new keystore", password_file, confirm=True))
    _shown(entry.address, entry.path)


@account_app.command("import")
def account_import(
    key_file: Annotated[Optional[Path], typer.Option(
        "--key-file", exists=True, dir_okay=False,
        help="File holding the private key (64 hex digits); default: asked for on the terminal.")] = None,
    keystore: Annotated[Optional[Path], typer.Option(
        "--keystore", exists=True, dir_okay=False,
        help="An existing eth-account keystore to copy in (its own password opens it).")] = None,
    directory: Directory = None,
    password_file: NewPasswordFile = None,
) -> None:
    """Import a private key (from a file or the terminal) or an existing keystore file."""
    where = directory or default_keystore_dir()
    if key_file is not None and keystore is not None:
        raise BadOption("--key-file", "give --key-file or --keystore, not both")
    if keystore is not None:
        entry = import_keystore(keystore, where, password_file)
    else:
        key = parse_private_key(_read_key(key_file))
        entry = new_keystore(where, get_password("the new keystore", password_file, confirm=True), key)
    _shown(entry.address, entry.path)


def _read_key(key_file: Path | None) -> str:
    if key_file is not None:
        return key_file.read_text()
    if not sys.stdin.isatty():
        raise BadOption("--key-file", "no terminal to ask for the private key on: pass --key-file FILE")
    return getpass.getpass("private key (hex): ")


@account_app.command("list")
def account_list(directory: Directory = None, output: Output = OutputFormat.text) -> None:
    """Every keystore in the directory: full address and file."""
    where = directory or default_keystore_dir()
    entries = list_keystores(where)
    if output is OutputFormat.json:
        print_json([{"address": e.address, "path": str(e.path)} for e in entries])
        return
    if not entries:
        typer.echo(f"no keystores in {where} (make one with `unchained account new`)")
        return
    for entry in entries:
        typer.echo(f"{entry.address}  {entry.path}")


__all__ = ["account_app"]
