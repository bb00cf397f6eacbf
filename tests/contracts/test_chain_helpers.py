"""The chain helpers the contract tests share work on every client the suite runs on (anvil and
Hardhat's node): `mine_blocks` mines past the 256-block horizon of `blockhash` in one call."""

from brownie import chain, web3

from conftest import mine_blocks


def test_mine_blocks_mines_exactly_and_keeps_brownie_clock_in_step():
    start = web3.eth.block_number
    mine_blocks(300)
    assert web3.eth.block_number == start + 300
    latest = web3.eth.get_block("latest")
    assert chain.time() >= latest.timestamp  # brownie's clock re-read from the chain
    assert web3.eth.get_block(start + 1).hash != latest.hash


def test_mine_blocks_of_one_or_none():
    start = web3.eth.block_number
    mine_blocks(1)
    mine_blocks(0)
    assert web3.eth.block_number == start + 1
