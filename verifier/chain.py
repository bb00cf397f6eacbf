"""The verifier's view of the chain: its own signing account on the deployed contracts.

Transactions go through the account's one `client.tx.TxSender`, which raises the client's
errors: `TransactionReverted` (a contract refused) and `NodeUnavailable` (the node does not
answer or does not mine in time: transient, retried on the next tick).
"""

from __future__ import annotations

from typing import Any

from eth_account.signers.local import LocalAccount
from hexbytes import HexBytes
from web3 import Web3
from web3.types import TxReceipt

from client.chain import ChainContext, open_chain
from client.tx import TxSender
from protocol.deployments import Deployment
from verifier import VerifierError


class VerifierChain(ChainContext):
    def __init__(self, web3: Web3, deployment: Deployment, sender: TxSender) -> None:
        super().__init__(web3, deployment)
        self.sender = sender

    @classmethod
    def connect(cls, rpc_url: str, deployment: Deployment, account: LocalAccount | None = None,
                unlocked_sender: str | None = None) -> "VerifierChain":
        """Signs with `account`; `unlocked_sender` (a node-unlocked dev account) is for local chains."""
        web3, deployment = open_chain(rpc_url, deployment, timeout_s=30)
        signer = account if account is not None else unlocked_sender
        if signer is None:
            raise VerifierError("a verifier needs its own account (keystore)")
        return cls(web3, deployment, TxSender(web3, signer, deployment))

    @property
    def address(self) -> str:
        return self.sender.address

    def send(self, fn: Any, value: int = 0) -> TxReceipt:
        """Sends a contract call from the verifier's account and waits for it to be mined."""
        return self.sender.send(fn, value)

    def broadcast(self, fn: Any, value: int = 0) -> HexBytes:
        """Sends a contract call without waiting (see TxSender.broadcast); then `mined`."""
        return self.sender.broadcast(fn, value)

    def mined(self, tx_hash: bytes, what: str) -> TxReceipt:
        return self.sender.mined(tx_hash, what)
