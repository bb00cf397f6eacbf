"""A deployed contract set on a local chain, driven from anvil's unlocked accounts.

The demo and the benchmarks act for several parties (providers, renters, verifiers) at once;
on anvil each party is one of the node's funded accounts. Production parties sign with their
own keys in their own services; nothing here is used by them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from web3 import Web3
from web3.contract import Contract
from web3.exceptions import ContractCustomError
from web3.types import TxReceipt

from protocol.deployments import Deployment, describe_revert


class TransactionFailed(RuntimeError):
    """A transaction reverted; carries what was attempted."""


@dataclass
class ChainSession:
    web3: Web3
    deployment: Deployment

    @classmethod
    def connect(cls, rpc_url: str, deployment: Deployment) -> "ChainSession":
        return cls(Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": 60})), deployment)

    def contract(self, name: str) -> Contract:
        deployed = self.deployment.contract(name)
        return self.web3.eth.contract(address=deployed.address, abi=deployed.abi)

    @property
    def accounts(self) -> list[str]:
        return self.web3.eth.accounts

    def send(self, fn: Any, sender: str, value: int = 0, what: str = "") -> TxReceipt:
        """Sends `fn` (a bound contract function) from `sender` and waits for success."""
        try:
            # Estimated on the pending block, where it runs: on the latest block a call reading
            # that block's own hash (fresh PoG/challenge randomness) would be refused.
            gas = fn.estimate_gas({"from": sender, "value": value}, block_identifier="pending")
            tx_hash = fn.transact({"from": sender, "value": value, "gas": gas + gas // 5})
        except ContractCustomError as exc:
            raise TransactionFailed(f"{what or fn.fn_name}: {describe_revert(self.deployment, exc.data)}") from exc
        receipt = self.web3.eth.wait_for_transaction_receipt(tx_hash)
        if receipt.status != 1:
            raise TransactionFailed(f"{what or fn.fn_name} reverted (tx {tx_hash.hex()})")
        return receipt

    def advance(self, seconds: int) -> None:
        """Moves the chain's clock forward and mines a block (anvil's evm_increaseTime)."""
        self.web3.provider.make_request("evm_increaseTime", [seconds])
        self.mine()

    def mine(self, blocks: int = 1) -> None:
        for _ in range(blocks):
            self.web3.provider.make_request("evm_mine", [])

    def now(self) -> int:
        return self.web3.eth.get_block("latest")["timestamp"]

    def balance(self, address: str) -> int:
        return self.web3.eth.get_balance(address)
