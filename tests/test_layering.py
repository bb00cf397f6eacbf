"""The rooms, held at import level: `protocol/` (formats every party agrees on) imports none of the
others; `client/` (the I/O they share) only `protocol/`; the services (`backend/` the server,
`renter/`, `provider_agent/`, `verifier/`) import neither each other nor the CLI; and nothing that
ships imports `devtools/`, which the wheel leaves out. Every import statement counts, those inside
functions included."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SERVICES = ("backend", "renter", "provider_agent", "verifier")
SHIPPED = ("protocol", "client", *SERVICES, "unchained_cli")
DEV = "devtools"
# What each room may not import (besides itself).
FORBIDDEN = {
    "protocol": {"client", *SERVICES, "unchained_cli", DEV},
    "client": {*SERVICES, "unchained_cli", DEV},
    **{service: {*(s for s in SERVICES if s != service), "unchained_cli", DEV} for service in SERVICES},
    "unchained_cli": {DEV},
}
# The one door from the product into the dev tools: `unchained demo|up|bench` load them by name
# from a source checkout (unchained_cli/dev.py), and stand in with a one-line error without one.
DEV_DOOR = Path("unchained_cli/dev.py")


def imported(path: Path) -> Iterator[tuple[int, str]]:
    """(line, top-level package) of every import in a source file, and of every
    importlib.import_module("...") with a literal name."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.lineno, node.args[0].value.split(".")[0]


def violations(root: Path, room: str, forbidden: set[str]) -> list[str]:
    found = []
    for path in sorted((root / room).rglob("*.py")):
        relative = path.relative_to(root)
        for line, package in imported(path):
            if package in forbidden and not (relative == DEV_DOOR and package == DEV):
                found.append(f"{relative}:{line} imports {package}")
    return found


def test_every_room_imports_only_what_lies_below_it() -> None:
    found = [v for room, forbidden in FORBIDDEN.items() for v in violations(REPO, room, forbidden)]
    assert found == []


def test_the_guard_sees_imports_inside_functions_and_by_name(tmp_path: Path) -> None:
    (tmp_path / "renter").mkdir()
    (tmp_path / "renter" / "late.py").write_text(
        "import importlib\n\ndef f():\n    from backend.chain import Chain\n"
        "    return importlib.import_module('verifier.cli'), Chain\n")
    assert violations(tmp_path, "renter", FORBIDDEN["renter"]) == [
        "renter/late.py:4 imports backend", "renter/late.py:5 imports verifier"]


def test_the_wheel_ships_every_room_but_the_dev_tools() -> None:
    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert all(any(fnmatch(room, pattern) for pattern in include) for room in SHIPPED)
    assert not any(fnmatch(DEV, pattern) or fnmatch(f"{DEV}.cli", pattern) for pattern in include)
