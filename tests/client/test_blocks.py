"""client.blocks reads the fields web3's get_block gives, from the node's JSON."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from web3 import Web3
from web3.exceptions import BlockNotFound

from client import blocks
from client.ports import free_port
from client.tx import connect
from unchained_cli.chain import LocalChain


@pytest.fixture(scope="module")
def web3() -> Iterator[Web3]:
    with LocalChain(port=free_port()) as chain:
        web3 = connect(chain.rpc_url)
        web3.provider.make_request("anvil_mine", [3, 7])  # three blocks 7 s apart
        yield web3


def test_the_fields_match_web3s_block(web3: Web3) -> None:
    for number in (0, 2, web3.eth.block_number):
        block = web3.eth.get_block(number)
        assert blocks.block_hash(web3, number) == bytes(block["hash"])
        assert blocks.timestamp(web3, number) == block["timestamp"]
    assert blocks.timestamp(web3) == web3.eth.get_block("latest")["timestamp"]
    assert int(blocks.header(web3)["number"], 16) == web3.eth.block_number


def test_a_block_the_node_lacks_is_not_found(web3: Web3) -> None:
    with pytest.raises(BlockNotFound, match=str(web3.eth.block_number + 5)):
        blocks.block_hash(web3, web3.eth.block_number + 5)
