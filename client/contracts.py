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
from typing import Any, TypeAlias

import web3._utils.abi as web3_abi
from web3 import Web3
from web3.contract import Contract

from protocol.deployments import Deployment

# web3 7 builds a new named tuple class for every struct it decodes (about 1.2 ms on these
# machines, more than the call's own decoding); the class depends only on the field names, so
# it is made once per set of names. `recursive_dict_to_namedtuple` looks the factory up in its
# module at each call, so this cache is what every contract made here uses.
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


__all__ = ["Struct", "bind", "deployed", "factory"]
