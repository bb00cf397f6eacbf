"""The renter's side of the chain: a keystore account that signs its own transactions.

The backend server never calls this module; the CLI does, in the renter's process. Keystores are
opened with `client.keystore.load_keystore` (the one password story of every signing command);
transactions go through the account's `client.tx.TxSender`, which raises the client's errors
(`TransactionReverted`, `NodeUnavailable`, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount
from web3.types import TxReceipt

from client.chain import ChainContext, open_chain
from client.tx import TxSender


class Wallet(ChainContext):
    """The chain context (client.chain), sending transactions signed by `account`."""

    def __init__(self, rpc_url: str, account: LocalAccount, deployment_file: Path | None = None) -> None:
        super().__init__(*open_chain(rpc_url, deployment_file=deployment_file))
        self.account = account
        self.sender = TxSender(self.web3, account, self.deployment)

    def send(self, fn: Any, value: int = 0) -> TxReceipt:
        return self.sender.send(fn, value)
