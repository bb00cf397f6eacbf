"""The CLI's one error boundary: every expected failure becomes one line saying what to fix.

`unchained_cli.main.main` runs the command tree inside `run_guarded`; an exception that reaches
it is explained here (`explain`) and printed as one line on stderr with exit status 1 (2 for bad
usage), never as a traceback. `--debug` (or UNCHAINED_DEBUG=1) lets the traceback through.

Connection failures are recognised anywhere in an exception's cause chain, because the
services wrap them in their own errors ("no JSON-RPC node at URL: HTTPConnectionPool(...)
Max retries exceeded ... NewConnectionError(...)") whose text buries what to do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from typer._click.exceptions import ClickException  # Typer >= 0.20 vendors Click as typer._click

REPO_ROOT = Path(__file__).resolve().parent.parent
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
        current = current.__cause__ or current.__context__


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
    import httpx
    import requests

    for err in _chain(exc):
        if isinstance(err, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
            url = _url_of(err)
            where = _base(url) if url else "the RPC URL"
            return Explained(f"no JSON-RPC node answers at {where}: start one (`unchained up` or "
                             "`unchained chain up`) or pass --rpc URL")
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


def _known_abis() -> list[list[dict[str, Any]]]:
    """ABIs to decode revert data with: the packaged contract artifacts (an installed wheel),
    the compiled contracts of a checkout, and every deployment file."""
    abis = []
    try:  # protocol/artifacts, where the packaging branch puts them
        from unchained_cli.contract_artifacts import load, read_index

        index = read_index() or {"contracts": []}
        abis.extend(load(name)["abi"] for name in index["contracts"])
    except Exception:  # absent on this tree or in this installation: the build folder serves
        pass
    for path in sorted((REPO_ROOT / "build" / "contracts").glob("*.json")):
        try:
            abis.append(json.loads(path.read_text())["abi"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    for path in sorted((REPO_ROOT / "deployments").glob("*.json")):
        try:
            data = json.loads(path.read_text())
            abis.extend(c["abi"] for c in data.get("contracts", {}).values() if isinstance(c, dict) and "abi" in c)
        except (OSError, ValueError, AttributeError):
            continue
    return abis


def decode_revert(data: str | bytes) -> str:
    """`ErrorName(args)` from revert data, against every ABI the repository's deployments hold."""
    from eth_abi import decode

    from protocol.deployments import error_signatures

    raw = bytes.fromhex(data[2:] if data.startswith("0x") else data) if isinstance(data, str) else bytes(data)
    for abi in _known_abis():
        known = error_signatures(abi).get(raw[:4])
        if known:
            name, types = known
            try:
                args = decode(types, raw[4:])
            except Exception:  # malformed arguments: the name alone still says what happened
                return f"{name}(...)"
            return f"{name}({', '.join('0x' + a.hex() if isinstance(a, bytes) else str(a) for a in args)})"
    return f"unknown revert 0x{raw.hex()}"


def _chain_error(exc: BaseException) -> Explained | None:
    from web3.exceptions import ContractCustomError, ContractLogicError, Web3RPCError

    for err in _chain(exc):
        text = str(err)
        if isinstance(err, Web3RPCError | ValueError) and "insufficient funds" in text.lower():
            return Explained("insufficient funds: the account cannot pay this transaction's value plus gas; "
                             "fund it or ask for less (check the amount, --gpus, --hours)")
        if isinstance(err, ContractCustomError):
            data = err.data if isinstance(err.data, str | bytes) else str(err.data)
            return Explained(f"the contract refused: {decode_revert(data)}")
        if isinstance(err, ContractLogicError):
            return Explained(f"the contract refused: {err}")
    return None


def _domain_roots() -> tuple[type[BaseException], ...]:
    """Every package's root exception: their messages are written to be shown as they are."""
    roots: list[type[BaseException]] = [CliError]
    for module, name in (("backend.errors", "BackendError"), ("provider_agent", "ProviderAgentError"),
                         ("verifier", "VerifierError"), ("protocol.errors", "ProtocolError"),
                         ("client", "ClientError"), ("unchained_cli.chain", "ChainError"),
                         ("unchained_cli.deploy", "DeployError"), ("unchained_cli.market", "MarketError"),
                         ("unchained_cli.demo", "DemoError"), ("protocol.tasks", "BadBrokerUrl")):
        try:
            roots.append(getattr(__import__(module, fromlist=[name]), name))
        except (ImportError, AttributeError):  # a package another branch adds
            continue
    return tuple(roots)


def explain(exc: BaseException) -> Explained:
    """One line (and an exit status) for any exception that reached the boundary."""
    if isinstance(exc, CliError):
        return Explained(str(exc), exc.exit_code)
    for probe in (_connection, _chain_error):
        found = probe(exc)
        if found is not None:
            return found
    if isinstance(exc, _domain_roots()):
        return Explained(_one_line(str(exc)) or type(exc).__name__)
    if isinstance(exc, OSError) and exc.filename is not None:
        return Explained(f"{exc.filename}: {exc.strerror or exc}")
    return Explained(f"unexpected {type(exc).__name__}: {_one_line(str(exc))} "
                     f"(run with --debug for the traceback)")


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
    except Exception as exc:  # the boundary: everything else is explained in one line
        if debug_enabled():
            raise
        explained = explain(exc)
        typer.echo(f"error: {explained.message}", err=True)
        return explained.exit_code

