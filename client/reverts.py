"""Revert data decoded once, against the custom errors of every contract.

The selectors come from the packaged artifacts (protocol/artifacts: every contract of the
project, libraries and test contracts included) and from any ABI a caller adds (a deployment
file written by another version). A revert of one contract that bubbles up through another
(the escrow calling the staking contract) is named by whichever contract declares it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from eth_abi import decode
from eth_utils import keccak, to_checksum_address
from web3.exceptions import ContractCustomError, ContractLogicError

from client.revert_sentences import SENTENCES

ARTIFACTS_PACKAGE, ARTIFACTS_FOLDER = "protocol", "artifacts"

# selector -> (error name, argument names, argument types)
ErrorTable = dict[bytes, tuple[str, tuple[str, ...], tuple[str, ...]]]


@dataclass(frozen=True)
class Revert:
    """A decoded revert: `error` None when no known ABI declares its selector."""

    error: str | None
    args: dict[str, Any] = field(default_factory=dict)
    text: str = ""  # `ErrorName(arg, ...)`, or what the node said


def error_table(abis: Iterable[list[dict[str, Any]]]) -> ErrorTable:
    table: ErrorTable = {}
    for abi in abis:
        for item in abi:
            if item.get("type") != "error":
                continue
            inputs = item.get("inputs", [])
            types = tuple(arg["type"] for arg in inputs)
            names = tuple(arg.get("name") or f"arg{i}" for i, arg in enumerate(inputs))
            table[keccak(text=f"{item['name']}({','.join(types)})")[:4]] = (item["name"], names, types)
    return table


@cache
def packaged_errors() -> ErrorTable:
    """The custom errors of every packaged contract artifact (empty when none are packaged)."""
    folder = resources.files(ARTIFACTS_PACKAGE) / ARTIFACTS_FOLDER
    if not folder.is_dir():
        return {}
    abis = [json.loads(entry.read_text()).get("abi", []) for entry in folder.iterdir()
            if entry.name.endswith(".json") and entry.name != "index.json"]
    return error_table(abis)


def _shown(value: Any) -> str:
    return "0x" + value.hex() if isinstance(value, bytes) else str(value)


def decode_revert(data: str | bytes, extra_abis: Iterable[list[dict[str, Any]]] = ()) -> Revert:
    """`data` (0x-hex or bytes, selector first) as the custom error it encodes."""
    raw = bytes.fromhex(data.removeprefix("0x")) if isinstance(data, str) else bytes(data)
    known = {**packaged_errors(), **error_table(extra_abis)}.get(raw[:4])
    if known is None:
        return Revert(None, {}, f"unknown revert 0x{raw.hex()}")
    name, names, types = known
    try:
        values = decode(list(types), raw[4:])
    except Exception:  # malformed arguments (eth_abi raises several types): the name still says what happened
        return Revert(name, {}, f"{name}(<undecodable arguments>)")
    values = tuple(to_checksum_address(v) if t == "address" else v for t, v in zip(types, values, strict=True))
    return Revert(name, dict(zip(names, values, strict=True)), f"{name}({', '.join(_shown(v) for v in values)})")


def revert_of(exc: ContractLogicError, extra_abis: Iterable[list[dict[str, Any]]] = ()) -> Revert:
    """The revert web3 raised (at an estimate or a call): decoded when it carries a custom error,
    else the node's text (a require string, a panic)."""
    if isinstance(exc, ContractCustomError):
        data = exc.data if isinstance(exc.data, str | bytes) else str(exc.data)
        return decode_revert(data, extra_abis)
    return Revert(None, {}, str(exc.message or exc))


def sentence(revert: Revert) -> str | None:
    """What a revert means and what to do, in one line; None for an error without one."""
    if revert.error is None or revert.error not in SENTENCES:
        return None
    try:
        return SENTENCES[revert.error](revert.args)
    # An ABI of another version with other arguments, or a time past what a date holds: the
    # decoded form is said instead.
    except (KeyError, ValueError, TypeError, OverflowError, OSError):
        return None


__all__ = ["Revert", "decode_revert", "error_table", "packaged_errors", "revert_of", "sentence"]
