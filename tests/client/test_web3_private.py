"""The private web3 names client/ still uses, pinned to the web3 release they were read in.

web3.py offers no public API for either:
- client.tx reads the gas estimate's error out of its own JSON-RPC batch with web3's reading of
  a revert (`web3._utils.error_formatters_utils.raise_contract_logic_error_on_revert`: custom
  error, panic, require string or not a revert at all). web3's public batch
  (`w3.batch_requests()`) formats every answer through its middlewares (the CPU the raw batch
  saves) and raises on the first error, losing the fee answers beside it.
- client.contracts wraps web3's named-tuple class factory for decoded structs
  (`web3._utils.abi.abi_decoded_namedtuple_factory`) in a cache: web3 7 builds a new class for
  every struct it decodes (about 1.2 ms, more than the decoding), and offers no hook.
pyproject.toml holds web3 to this minor release: before moving it, check both names here.
"""

from __future__ import annotations

from importlib.metadata import version

import pytest
import web3._utils.abi as web3_abi
from web3._utils.error_formatters_utils import raise_contract_logic_error_on_revert
from web3.exceptions import ContractCustomError, ContractLogicError

import client.contracts  # noqa: F401  installs the class cache


def test_web3_is_the_release_the_private_names_were_read_in() -> None:
    assert version("web3").startswith("7.16."), "check client.tx and client.contracts' private web3 names"


def test_an_estimates_revert_is_read_as_web3_reads_it() -> None:
    custom = {"jsonrpc": "2.0", "id": 1, "error": {"code": 3, "message": "execution reverted",
                                                   "data": "0x12345678" + "00" * 32}}
    with pytest.raises(ContractCustomError):
        raise_contract_logic_error_on_revert(custom)  # type: ignore[arg-type]
    text = {"jsonrpc": "2.0", "id": 1, "error": {"code": 3, "message": "execution reverted: no", "data": None}}
    with pytest.raises(ContractLogicError, match="no"):
        raise_contract_logic_error_on_revert(text)  # type: ignore[arg-type]
    funds = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "insufficient funds for gas"}}
    assert raise_contract_logic_error_on_revert(funds) is funds  # type: ignore[arg-type]  # not a revert: returned


def test_structs_are_decoded_through_the_cached_factory() -> None:
    assert hasattr(web3_abi.abi_decoded_namedtuple_factory, "cache_info")  # client.contracts' cache is in place
    before = web3_abi.abi_decoded_namedtuple_factory.cache_info().hits
    web3_abi.recursive_dict_to_namedtuple({"renter": "0xa", "price": 1})
    web3_abi.recursive_dict_to_namedtuple({"renter": "0xb", "price": 2})
    assert web3_abi.abi_decoded_namedtuple_factory.cache_info().hits > before
