"""The renter's side of the chain: a keystore account that signs its own transactions.

The backend server never calls this module; the CLI does, in the renter's process. Keystores are
opened with `client.keystore.load_keystore` (the one password story of every signing command);
transactions go through the account's `client.tx.TxSender`, which raises the client's errors
(`TransactionReverted`, `NodeUnavailable`, ...)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount
from web3.contract import Contract
from web3.types import TxReceipt

from client import contracts
from client.tx import TxSender, connect
from protocol.deployments import Deployment, DeploymentFormatError
from renter.errors import DeploymentUnavailable

REPO_ROOT = Path(__file__).resolve().parent.parent


def load_deployment(path: Path) -> Deployment:
    try:
        return Deployment.from_json(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError, DeploymentFormatError) as exc:
        raise DeploymentUnavailable(f"cannot read deployment {path}: {exc}") from exc


class Wallet:
    """A web3 connection plus the deployment, sending transactions signed by `account`."""

    def __init__(self, rpc_url: str, account: LocalAccount, deployment_file: Path | None = None) -> None:
        self.web3 = connect(rpc_url)
        self.account = account
        self.deployment: Deployment = load_deployment(
            deployment_file or REPO_ROOT / "deployments" / f"{self.web3.eth.chain_id}.json")
        self.sender = TxSender(self.web3, account, self.deployment)
        self._contracts = contracts.DeployedContracts(self.web3, self.deployment)

    def contract(self, name: str) -> Contract:
        return self._contracts(name)

    def send(self, fn: Any, value: int = 0) -> TxReceipt:
        return self.sender.send(fn, value)
