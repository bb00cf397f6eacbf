"""The `unchained` console script's entry (and `python -m unchained_cli`): Ctrl-C is caught from
the first import on.

The script pip writes imports its entry's module before calling anything in it. Were that
unchained_cli.main, a Ctrl-C during its imports (typer, rich: tenths of a second on a loaded
machine) would end in a KeyboardInterrupt traceback before any of our code ran. This module
imports nothing until inside the guard; from there on, unchained_cli.errors answers a Ctrl-C.
"""

import sys

EXIT_INTERRUPTED = 130  # unchained_cli.errors.EXIT_INTERRUPTED, which cannot be imported unguarded


def main() -> None:
    try:
        from unchained_cli.main import main as run_cli

        run_cli()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
