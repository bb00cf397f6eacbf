"""One optional configuration file for every command: its keys mirror the flags.

```toml
# ~/.unchained/config.toml (or --config FILE, or $UNCHAINED_CONFIG)
rpc = "http://127.0.0.1:8545"       # every command that takes --rpc
backend = "http://127.0.0.1:8000"   # every command that takes --backend
broker = "redis://127.0.0.1:6379/0" # every command that takes --broker
keystore = "~/.unchained/keystores/0x....json"

["backend serve"]                   # one command (or a group: [job], [provider])
port = 8001
database = "postgresql+psycopg://me@db/unchained"
```

A top-level key applies to every command that has the flag of that name (`max-price` and
`max_price` both name `--max-price`); a table named by a command path applies to that command or
every command of that group, and wins over the top level. What is given on the command line
wins over an environment variable, which wins over the file, which wins over the built-in
default (Click's `default_map` precedence). An unknown key or command is refused with its name,
so a typo never silently falls back to a default.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from unchained_cli.errors import BadOption

CONFIG_ENV = "UNCHAINED_CONFIG"
Path_ = tuple[str, ...]


def default_config_path() -> Path:
    return Path.home() / ".unchained" / "config.toml"


def read_config(path: Path | None) -> tuple[dict[str, Any], Path | None]:
    """The parsed file and where it was read; an explicit path must exist, the default may not."""
    explicit = path is not None
    path = (path or default_config_path()).expanduser()
    if not path.exists():
        if explicit:
            raise BadOption("--config", f"{path} does not exist")
        return {}, None
    try:
        return tomllib.loads(path.read_text()), path
    except (OSError, UnicodeDecodeError) as exc:
        raise BadOption("--config", f"cannot read {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BadOption("--config", f"{path} is not valid TOML: {exc}") from exc


def _commands(group: Any, prefix: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """(path, command) of every leaf command under a (Typer-vendored) Click group."""
    for name, command in group.commands.items():
        path = (*prefix, name)
        if hasattr(command, "commands"):
            yield from _commands(command, path)
        else:
            yield path, command


def _key(name: str) -> str:
    return name.replace("-", "_")


def _value(value: Any) -> Any:
    # Paths in the file may start with ~ like on a command line (the shell expands those).
    if isinstance(value, str) and value.startswith("~"):
        return str(Path(value).expanduser())
    if isinstance(value, list):
        return [_value(v) for v in value]
    return value


def default_map(root: Any, doc: Mapping[str, Any], source: Path | str = "config") -> dict[str, Any]:
    """Click's nested `default_map` for the command tree under `root` from a parsed config file."""
    options: dict[Path_, set[str]] = {
        path: {p.name for p in command.params if getattr(p, "param_type_name", "") == "option" and p.name}
        for path, command in _commands(root)}
    known = set().union(*options.values()) if options else set()
    groups = {path[:i] for path in options for i in range(1, len(path))}
    # (command or group path, option name) -> value; the longest path wins for a command.
    given: dict[tuple[Path_, str], Any] = {}

    def table(path: Path_, body: Mapping[str, Any]) -> None:
        for raw, value in body.items():
            if isinstance(value, dict):
                sub = (*path, *raw.split())
                if sub not in options and sub not in groups:
                    raise BadOption(str(source), f"no command `unchained {' '.join(sub)}` for table [{raw}]")
                table(sub, value)
                continue
            name = _key(raw)
            scope = [p for p in options if p[:len(path)] == path]
            if not any(name in options[p] for p in scope):
                where = f"`unchained {' '.join(path)}`" if path else "any command"
                raise BadOption(str(source), f"unknown key {raw!r}: {where} has no --{raw.replace('_', '-')} "
                                             f"flag")
            given[(path, name)] = _value(value)

    table((), doc)
    result: dict[str, Any] = {}
    for path, names in options.items():
        chosen: dict[str, Any] = {}
        for depth in range(len(path) + 1):  # the top level first, the command's own table last
            for name in names:
                if (path[:depth], name) in given:
                    chosen[name] = given[(path[:depth], name)]
        if chosen:
            node = result
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = chosen
    assert known >= {n for (_, n) in given}
    return result


def load_default_map(root: Any, path: Path | None) -> dict[str, Any] | None:
    """The default map from `path` (or $UNCHAINED_CONFIG, or ~/.unchained/config.toml)."""
    if path is None and os.environ.get(CONFIG_ENV):
        path = Path(os.environ[CONFIG_ENV])
    doc, source = read_config(path)
    return default_map(root, doc, source or "config") if doc else None
