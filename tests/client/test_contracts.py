"""client.contracts: structs decoded by name, their classes made once per set of field names."""

from __future__ import annotations

import importlib

import web3._utils.abi as web3_abi

importlib.import_module("client.contracts")  # what every party imports: it installs the class cache


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
