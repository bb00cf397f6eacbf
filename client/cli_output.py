"""`-o/--output`, the option of every read command (tests/cli/test_lazy_commands.py holds them to
it), and its JSON printer: text for people, one JSON document on stdout for scripts."""

from __future__ import annotations

import json
import sys
from enum import Enum
from typing import Annotated, Any

import typer


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


Output = Annotated[OutputFormat, typer.Option("--output", "-o", help=(
    "text for people, json for scripts: one JSON document on stdout (amounts in wei as strings, times in unix "
    "seconds)."))]


def print_json(doc: Any) -> None:
    """One JSON document on stdout, nothing else (rich would wrap and colour it)."""
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


__all__ = ["Output", "OutputFormat", "print_json"]
