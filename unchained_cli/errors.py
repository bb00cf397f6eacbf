"""The CLI's one error boundary: every expected failure becomes one line saying what to fix.

The root command is a `GuardedGroup`: an exception any command raises (a service's sub-app
included: they raise their package's errors and print none themselves) is explained here
(`explain`) and printed as one line on stderr with exit status 1 (2 for bad usage, or what the
error's `exit_code` says), never as a traceback. `unchained_cli.main.main` runs the tree inside
`run_guarded`, which also explains what fails outside a command (parsing, the root callback).
`--debug` (or UNCHAINED_DEBUG=1) lets the traceback through. Ctrl-C anywhere ends with the one
line "interrupted" and exit status 130 (unchained_cli/__main__.py guards the imports before this).

Connection failures are recognised anywhere in an exception's cause chain, because the
services wrap them in their own errors ("no JSON-RPC node at URL: HTTPConnectionPool(...)
Max retries exceeded ... NewConnectionError(...)") whose text buries what to do.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import typer
from typer._click.exceptions import ClickException  # Typer >= 0.20 vendors Click as typer._click
from typer.core import TyperGroup

DEBUG_ENV = "UNCHAINED_DEBUG"
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """Root of the CLI's own errors: the message is the one line shown, `exit_code` the status."""

    exit_code = EXIT_FAILURE


class BadOption(CliError):
    """A flag's value (or a config file's key) cannot be used; the message names the flag."""

    exit_code = EXIT_USAGE

    def __init__(self, option: str, reason: str) -> None:
        super().__init__(f"{option}: {reason}")
        self.option, self.reason = option, reason


@dataclass(frozen=True)
class Explained:
    message: str
    exit_code: int = EXIT_FAILURE


_debug = False


def set_debug(on: bool) -> None:
    global _debug
    _debug = on


def debug_enabled() -> bool:
    return _debug or os.environ.get(DEBUG_ENV, "") not in ("", "0", "false", "no")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def _url_of(exc: BaseException) -> str | None:
    request = getattr(exc, "request", None)
    try:
        url = getattr(request, "url", None)
    except RuntimeError:  # httpx raises when an error carries no request
        return None
    return str(url) if url else None


def _base(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else url


def _connection(exc: BaseException) -> Explained | None:
    """A node, backend or broker that does not answer, wherever in the chain it was raised."""
    # An error of a library's types exists only if the command imported that library: looked up,
    # not imported here (requests alone costs a read command's error path 0.1 s of CPU).
    requests = sys.modules.get("requests")
    httpx = sys.modules.get("httpx")

    for err in _chain(exc):
        if requests is not None and isinstance(err, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
            url = _url_of(err)
            where = _base(url) if url else "the RPC URL"
            return Explained(f"no JSON-RPC node answers at {where}: start one (`unchained up` or "
                             "`unchained chain up`) or pass --rpc URL")
        if httpx is None:
            continue
        if isinstance(err, httpx.UnsupportedProtocol | httpx.InvalidURL):
            return Explained(f"not a usable backend URL ({err}): pass --backend http://HOST:PORT", EXIT_USAGE)
        if isinstance(err, httpx.TransportError):
            url = _url_of(err)
            where = _base(url) if url else "the given URL"
            if "Name or service not known" in str(err) or "nodename nor servname" in str(err):
                return Explained(f"{where}: no such host: pass --backend http://HOST:PORT", EXIT_USAGE)
            verb = "timed out" if isinstance(err, httpx.TimeoutException) else "refused the connection"
            return Explained(f"{where} {verb}: is the backend running (`unchained backend serve` or "
                             "`unchained up`)? Pass --backend URL")
    for err in _chain(exc):
        module = type(err).__module__
        if module.startswith(("redis", "kombu")) and "Error" in type(err).__name__:
            return Explained(f"the Celery broker does not answer ({err}): start it (`unchained up` "
                             "starts one) or pass --broker URL")
    return None


def _chain_error(exc: BaseException) -> Explained | None:
    if "web3" not in sys.modules:  # no node was asked anything: no chain error (and no 0.5 s import)
        return None
    from web3.exceptions import ContractLogicError, Web3RPCError

    from client.reverts import revert_of, sentence

    for err in _chain(exc):
        text = str(err)
        if isinstance(err, Web3RPCError | ValueError) and "insufficient funds" in text.lower():
            return Explained("insufficient funds: the account cannot pay this transaction's value plus gas; "
                             "fund it or ask for less (check the amount, --gpus, --hours)")
        if isinstance(err, ContractLogicError):  # a revert raised by a read (sends raise TransactionReverted)
            revert = revert_of(err)
            return Explained(f"the contract refused: {sentence(revert) or revert.text}")
    return None


def _domain_roots() -> tuple[type[BaseException], ...]:
    """Every package's one root exception: their messages are written to be shown as they are."""
    from backend.errors import BackendError
    from client.errors import ClientError
    from protocol.errors import ProtocolError
    from provider_agent import ProviderAgentError
    from renter.errors import RenterError
    from verifier import VerifierError

    return (CliError, BackendError, ClientError, ProtocolError, ProviderAgentError, RenterError, VerifierError)


def explain(exc: BaseException) -> Explained:
    """One line (and an exit status) for any exception that reached the boundary."""
    if isinstance(exc, CliError):
        return Explained(str(exc), exc.exit_code)
    from client.errors import NodeUnavailable, TransactionReverted

    if isinstance(exc, NodeUnavailable):  # names the node's URL, which the transport's own error may not
        return Explained(_one_line(str(exc)))
    found = _connection(exc)
    if found is not None:
        return found
    if isinstance(exc, TransactionReverted):  # decoded already, and says whether anything was sent
        return Explained(_one_line(_reverted(exc)))
    found = _chain_error(exc)
    if found is not None:
        return found
    if isinstance(exc, _domain_roots()):
        return Explained(_one_line(str(exc)) or type(exc).__name__, getattr(exc, "exit_code", EXIT_FAILURE))
    if isinstance(exc, OSError) and exc.filename is not None:
        return Explained(f"{exc.filename}: {exc.strerror or exc}")
    if isinstance(exc, ModuleNotFoundError) and exc.name:  # a service's command in a renter's install
        return Explained(f"this command needs the Python package {exc.name.split('.')[0]}, which this install "
                         f"lacks: install the extra of the role that runs it (pip install "
                         f"'unchained[provider]', '[verifier]' or '[backend]')")
    return Explained(f"unexpected {type(exc).__name__}: {_one_line(str(exc))} "
                     f"(run with --debug for the traceback)")


def _reverted(exc: Any) -> str:
    """A refused transaction as what it means and what to do (client.reverts.sentence) when the
    error is one a user can hit; its decoded form only for the others."""
    from client.reverts import Revert, sentence

    said = sentence(Revert(exc.error, exc.error_args, exc.reason))
    if said is None:
        return str(exc)
    if exc.tx_hash:  # mined and reverted: it cost gas, and the hash lets the user look it up
        return f"{said} (tx {exc.tx_hash} reverted)"
    return f"{said}; nothing was sent"


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    return f"{lines[0]} (+{len(lines) - 1} more lines; --debug shows everything)"


def _show_usage_error(exc: ClickException) -> None:
    try:
        from typer import rich_utils

        rich_utils.rich_format_error(exc)  # what Typer prints in standalone mode (help for no args)
    except ImportError:
        exc.show()


def _report(exc: Exception) -> int:
    explained = explain(exc)
    typer.echo(f"error: {explained.message}", err=True)
    return explained.exit_code


def _reader_left() -> int:
    """stdout's reader is gone (`unchained ... | head`): the rest of the output, and the flush at
    exit, go nowhere instead of raising again; nothing is said, as coreutils say nothing, and the
    status is Rich's and Click's for the same case (they handle the writes they make themselves)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_FAILURE


class GuardedGroup(TyperGroup):
    """The root command group: whatever a command raises ends here as one line (see above)."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:  # the root's own --help is written while its context is made
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:
            raise typer.Exit(_reader_left()) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (ClickException, typer.Exit, typer.Abort):  # Click's own ways out: it shows them
            raise
        except BrokenPipeError:
            raise typer.Exit(_reader_left()) from None
        except KeyboardInterrupt:  # loading the command, connecting, running: Typer would exit 130 silently
            typer.echo("interrupted", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            if debug_enabled():
                raise
            raise typer.Exit(_report(exc)) from exc


def run_guarded(command: Any, args: list[str] | None = None, prog_name: str = "unchained") -> int:
    """Runs the command tree (`typer.main.get_command(app)`); returns the exit status and never
    raises, except with --debug."""
    try:
        result = command.main(args=args, prog_name=prog_name, standalone_mode=False)
        return result if isinstance(result, int) else 0
    except typer.Exit as exc:
        return exc.exit_code
    except ClickException as exc:
        _show_usage_error(exc)
        return exc.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except Exception as exc:  # failing outside a command (GuardedGroup explains the rest)
        if debug_enabled():
            raise
        return _report(exc)

