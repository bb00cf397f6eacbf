"""The chain helpers the contract tests share work on every client the suite runs on (anvil and
Hardhat's node): `mine_blocks` mines past the 256-block horizon of `blockhash` in one call, and a
transaction whose receipt the node serves late is confirmed, not called dropped."""

from brownie import chain, web3
from web3.exceptions import TransactionNotFound

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


def test_a_receipt_served_after_the_nonce_moved_is_still_confirmed(accounts, monkeypatch):
    """The node counts the transaction in the sender's nonce before it serves the receipt (once):
    brownie's confirmation thread alone would call the mined transaction dropped."""
    served = type(web3.eth).get_transaction_receipt
    asked = []

    def late_once(eth, txid):
        asked.append(txid)
        if len(asked) == 1:
            raise TransactionNotFound("not yet")
        return served(eth, txid)

    monkeypatch.setattr(type(web3.eth), "get_transaction_receipt", late_once)
    tx = accounts[0].transfer(accounts[1], 1)
    assert tx.status == 1 and len(asked) >= 2
