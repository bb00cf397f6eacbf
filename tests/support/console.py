"""The console's commands run in-process, as `unchained` runs them (errors end as one line)."""

from __future__ import annotations

import typer
from typer.testing import CliRunner


def folded(text: str) -> str:
    """`text` on one line, its white space folded (Rich wraps long sentences)."""
    return " ".join(text.split())


class Console:
    def __init__(self, app: typer.Typer) -> None:
        self.app = app
        self.runner = CliRunner()

    def run(self, *args: str) -> tuple[int, str]:
        """The exit code and the output, folded: for commands that may fail."""
        result = self.runner.invoke(self.app, list(args), terminal_width=300)
        return result.exit_code, folded(result.output)

    def ok(self, *args: str) -> str:
        """The output of a command that must succeed (the test fails with its output otherwise)."""
        result = self.runner.invoke(self.app, list(args), catch_exceptions=False, terminal_width=300)
        assert result.exit_code == 0, result.output
        return result.output


__all__ = ["Console", "folded"]
