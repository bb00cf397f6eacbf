"""client.contracts: structs decoded by name, their classes made once per set of field names; a
deployment's contracts bound once per connection."""

from __future__ import annotations

import pytest
import web3._utils.abi as web3_abi
from web3 import Web3

from client.contracts import DeployedContracts  # what every party imports: it installs the class cache
from protocol.deployments import DeployedContract, Deployment, DeploymentFormatError


def test_a_struct_decoded_twice_reuses_its_class_and_reads_by_name() -> None:
    first = web3_abi.recursive_dict_to_namedtuple({"renter": "0xa", "provider": "0xb", "inner": {"price": 1}})
    second = web3_abi.recursive_dict_to_namedtuple({"renter": "0xc", "provider": "0xd", "inner": {"price": 2}})
    assert type(first) is type(second)
    assert (second.provider, second.inner.price) == ("0xd", 2)
    assert first.provider == "0xb"  # the values are the instance's own, not the class's


def test_structs_with_other_fields_get_other_classes() -> None:
    job = web3_abi.recursive_dict_to_namedtuple({"renter": "0xa", "provider": "0xb"})
    lease = web3_abi.recursive_dict_to_namedtuple({"renter": "0xa", "gpuCount": 2})
    assert type(job) is not type(lease)
    assert lease.gpuCount == 2
    assert not hasattr(lease, "provider")


def test_deployed_contracts_are_built_once_per_name() -> None:
    abi = [{"type": "function", "name": "ping", "inputs": [], "outputs": [], "stateMutability": "view"}]
    deployment = Deployment(31337, "0x" + "11" * 20, {name: DeployedContract("0x" + digit * 40, abi, 1)
                                                      for name, digit in (("A", "a"), ("B", "b"))})
    bound = DeployedContracts(Web3(), deployment)
    assert bound("A") is bound("A")
    assert bound("B") is not bound("A") and bound("B").address == Web3.to_checksum_address("0x" + "b" * 40)
    with pytest.raises(DeploymentFormatError, match="C"):
        bound("C")
