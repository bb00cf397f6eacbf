"""Typed contract views: the one place every party makes its web3 contract objects.

Every contract is bound with `decode_tuples=True`, so a struct comes back as a named tuple with
the Solidity field names (`escrow.functions.jobState(i).call().status`, never `[1]`) and a
function with several named outputs as a named tuple of them (`unbondingOf(a).call().releaseAt`).
A field that moves in Solidity then still reads the right value, and one that is renamed or
removed fails loudly (AttributeError) instead of reading its neighbour. Enum fields stay ints on
the wire; compare them with the IntEnums of `protocol.enums`.
"""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Sequence
from typing import Any, TypeAlias, cast

import web3._utils.abi as web3_abi
from eth_abi import decode, encode
from eth_typing import ABIFunction
from eth_utils.abi import collapse_if_tuple, function_abi_to_4byte_selector
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import ContractLogicError, Web3RPCError
from web3.logs import DISCARD
from web3.providers import JSONBaseProvider
from web3.types import EventData, RPCEndpoint, TxReceipt

from client.errors import ClientError

from protocol.deployments import Deployment

# web3 7 builds a new named tuple class for every struct it decodes (about 1.2 ms on these
# machines, more than the call's own decoding); the class depends only on the field names, so
# it is made once per set of names. `recursive_dict_to_namedtuple` looks the factory up in its
# module at each call, so this cache is what every contract made here uses. A private name with
# no public hook: tests/client/test_web3_private.py pins the web3 release it was read in.
web3_abi.abi_decoded_namedtuple_factory = functools.lru_cache(maxsize=1024)(web3_abi.abi_decoded_namedtuple_factory)

# What a struct-returning view gives back: a named tuple whose fields are the Solidity names.
Struct: TypeAlias = Any


def bind(web3: Web3, address: str, abi: list[dict[str, Any]]) -> Contract:
    """The contract at `address` with `abi`, decoding structs and multiple outputs by name."""
    return web3.eth.contract(address=Web3.to_checksum_address(address), abi=abi, decode_tuples=True)


def factory(web3: Web3, abi: list[dict[str, Any]], bytecode: str) -> type[Contract]:
    """A contract class to deploy from (`.constructor(...)`), bound the same way once deployed."""
    return web3.eth.contract(abi=abi, bytecode=bytecode, decode_tuples=True)


def deployed(web3: Web3, deployment: Deployment, name: str) -> Contract:
    """The deployment's contract `name` (DeploymentFormatError when it has none)."""
    found = deployment.contract(name)
    return bind(web3, found.address, found.abi)


def emitted(contract: Contract, event: str, receipt: TxReceipt) -> tuple[EventData, ...]:
    """The `event`s `contract` logged in a mined transaction. A receipt also holds the logs of the
    other contracts the transaction called (Staking's, the registry's); web3 would warn about each
    of those (MismatchedABI) before skipping it, so they are skipped quietly."""
    found: tuple[EventData, ...] = contract.events[event]().process_receipt(receipt, errors=DISCARD)
    return found


class DeployedContracts:
    """The deployment's contracts bound to one connection, each built on first use: web3 builds a
    contract from its ABI in about 15 ms (JobEscrow on these machines), which a renter's wallet
    paid on every job and the verifier on every read."""

    def __init__(self, web3: Web3, deployment: Deployment) -> None:
        self.web3 = web3
        self.deployment = deployment
        self._bound: dict[str, Contract] = {}

    def __call__(self, name: str) -> Contract:
        found = self._bound.get(name)
        if found is None:  # two threads may both build it; one of the two is kept
            found = self._bound.setdefault(name, deployed(self.web3, self.deployment, name))
        return found


class ViewCall:
    """One view function of a bound contract, called on a hot path without web3's per-call work
    (finding and validating the function in the ABI, encoding through its middlewares: about 4 of
    the 6 ms a `jobState` read takes on these machines). It decodes as `bind` does: a struct as a
    named tuple of its Solidity field names, several outputs as a named tuple of them, an address
    checksummed. Reads go to "latest", alone or in one round trip with other requests (`read_with`)."""

    def __init__(self, contract: Contract, name: str) -> None:
        [abi] = [cast(ABIFunction, e) for e in contract.abi if e.get("type") == "function" and e.get("name") == name]
        self._address = contract.address
        self._web3 = contract.w3
        self._selector = function_abi_to_4byte_selector(abi)
        self._inputs = [collapse_if_tuple(p) for p in abi["inputs"]]
        self._outputs = cast(list[dict[str, Any]], abi["outputs"])
        self._output_types = [collapse_if_tuple(p) for p in self._outputs]

    def request(self, *args: Any) -> tuple[str, list[Any]]:
        data = "0x" + (self._selector + encode(self._inputs, list(args))).hex()
        return "eth_call", [{"to": self._address, "data": data}, "latest"]

    def __call__(self, *args: Any) -> Any:
        [value] = read_with(self._web3, [self.request(*args)], [self.decode])
        return value

    def decode(self, result: str) -> Any:
        values = decode(self._output_types, bytes.fromhex(result[2:]))
        named = [_named(p, v) for p, v in zip(self._outputs, values)]
        if len(named) == 1:
            return named[0]
        return _tuple_class(tuple(p["name"] for p in self._outputs))(*named)


def read_with(web3: Web3, requests: Sequence[tuple[str, list[Any]]], decoders: Sequence[Any]) -> list[Any]:
    """The JSON-RPC `requests` in one round trip (one HTTP request), each result through its
    decoder. A reverted call raises ContractLogicError as web3 does, another failed request
    Web3RPCError, a batch the node refuses as a whole ReadFailed."""
    provider = cast(JSONBaseProvider, web3.provider)  # an HTTP provider (client.tx.http_web3) batches
    responses = provider.make_batch_request([(RPCEndpoint(method), params) for method, params in requests])
    if not isinstance(responses, list):  # the node refused the batch as a whole
        raise ReadFailed(f"the node refused a batch of {len(requests)} reads: {responses.get('error')}")
    by_id = sorted(responses, key=lambda r: int(str(r["id"])))
    values = []
    for (method, _), response, decoder in zip(requests, by_id, decoders):
        error = response.get("error")
        if error is not None:
            if method == "eth_call" and "revert" in str(error.get("message", "")).lower():
                raise ContractLogicError(error.get("message"), data=error.get("data"))
            raise Web3RPCError(f"{method}: {error}")
        values.append(decoder(response["result"]))
    return values


BATCH_READS = 50  # reads in one JSON-RPC batch: public nodes refuse larger batches (often 100)


def read_batched(web3: Web3, requests: Sequence[tuple[str, list[Any]]], decoders: Sequence[Any]) -> list[Any]:
    """`read_with` for any number of requests: BATCH_READS per round trip."""
    values: list[Any] = []
    for start in range(0, len(requests), BATCH_READS):
        values += read_with(web3, requests[start:start + BATCH_READS], decoders[start:start + BATCH_READS])
    return values


class ReadFailed(ClientError):
    """A batch of reads the node would not answer."""


def _named(param: dict[str, Any], value: Any) -> Any:
    if param["type"] == "address":
        return Web3.to_checksum_address(value)
    if param["type"] == "tuple":
        fields = param["components"]
        return _tuple_class(tuple(c["name"] for c in fields))(*(_named(c, v) for c, v in zip(fields, value)))
    return value


@functools.lru_cache(maxsize=256)
def _tuple_class(names: tuple[str, ...]) -> type:
    return namedtuple("Struct", names)  # noqa: PYI024


__all__ = ["DeployedContracts", "ReadFailed", "Struct", "ViewCall", "bind", "deployed", "factory", "read_with"]
