"""A deployed contract set on a local chain, driven from anvil's unlocked accounts.

The demo and the benchmarks act for several parties (providers, renters, verifiers) at once;
on anvil each party is one of the node's funded accounts. Production parties sign with their
own keys in their own services; nothing here is used by them.
"""

from __future__ import annotations

from typing import Any

from web3 import Web3
from web3.types import TxReceipt

from client.chain import ChainContext, open_chain
from client.tx import TxSender
from protocol.deployments import Deployment


class ChainSession(ChainContext):
    def __init__(self, web3: Web3, deployment: Deployment) -> None:
        super().__init__(web3, deployment)
        self._senders: dict[str, TxSender] = {}

    @classmethod
    def connect(cls, rpc_url: str, deployment: Deployment) -> "ChainSession":
        return cls(*open_chain(rpc_url, deployment))

    @property
    def accounts(self) -> list[str]:
        return self.web3.eth.accounts

    def sender(self, address: str) -> TxSender:
        """The one sender of an unlocked account (it owns that account's nonce)."""
        key = Web3.to_checksum_address(address)
        if key not in self._senders:
            self._senders[key] = TxSender(self.web3, key, self.deployment)
        return self._senders[key]

    def send(self, fn: Any, sender: str, value: int = 0, what: str = "") -> TxReceipt:
        """Sends `fn` (a bound contract function) from `sender` and waits for success."""
        return self.sender(sender).send(fn, value, what or None)

    def advance(self, seconds: int) -> None:
        """Moves the chain's clock forward and mines a block (anvil's evm_increaseTime)."""
        self.web3.provider.make_request("evm_increaseTime", [seconds])
        self.mine()

    def mine(self, blocks: int = 1) -> None:
        for _ in range(blocks):
            self.web3.provider.make_request("evm_mine", [])

    def balance(self, address: str) -> int:
        return self.web3.eth.get_balance(address)
