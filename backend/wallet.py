"""The renter's side of the chain: a keystore account that signs its own transactions.

The backend server never calls this module; the CLI does, in the renter's process. Keystores are
opened with `client.keystore.load_keystore` (the one password story of every signing command)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import ContractCustomError, ContractLogicError, TimeExhausted
from web3.types import TxReceipt

from backend.chain import REPO_ROOT, load_deployment
from backend.errors import BackendError
from protocol.deployments import Deployment, describe_revert

log = logging.getLogger(__name__)

RECEIPT_TIMEOUT_S = 180.0


class WalletError(BackendError):
    """No chain at the URL or a transaction failed; the text says which and why."""


class Wallet:
    """A web3 connection plus the deployment, sending transactions signed by `account`."""

    def __init__(self, rpc_url: str, account: LocalAccount, deployment_file: Path | None = None) -> None:
        self.web3 = Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": 60}))
        self.account = account
        try:
            chain_id = self.web3.eth.chain_id
        except Exception as exc:  # transport errors vary
            raise WalletError(f"no JSON-RPC node answers at {rpc_url} ({type(exc).__name__}): "
                              "start one (`unchained up`) or pass --rpc URL") from exc
        self.deployment: Deployment = load_deployment(
            deployment_file or REPO_ROOT / "deployments" / f"{chain_id}.json")

    def contract(self, name: str) -> Contract:
        deployed = self.deployment.contract(name)
        return self.web3.eth.contract(address=Web3.to_checksum_address(deployed.address), abi=deployed.abi)

    def send(self, fn: Any, value: int = 0) -> TxReceipt:
        """Builds, signs locally and sends `fn`; waits for the receipt; decodes reverts."""
        sender = self.account.address
        try:
            tx = fn.build_transaction({
                "from": sender, "value": value, "chainId": self.web3.eth.chain_id,
                "nonce": self.web3.eth.get_transaction_count(sender, "pending"),
            })
        except ContractCustomError as exc:
            data = exc.data if isinstance(exc.data, (str, bytes)) else str(exc.data)
            raise WalletError(f"{fn.fn_name} would revert: {describe_revert(self.deployment, data)}") from exc
        except ContractLogicError as exc:
            raise WalletError(f"{fn.fn_name} would revert: {exc}") from exc
        signed = self.account.sign_transaction(tx)
        tx_hash = self.web3.eth.send_raw_transaction(signed.raw_transaction)
        # Bounded: with a block time the receipt comes with the next block; a chain that stopped
        # producing blocks gets one line naming the transaction, not a hang or a traceback.
        try:
            receipt = self.web3.eth.wait_for_transaction_receipt(tx_hash, timeout=RECEIPT_TIMEOUT_S)
        except TimeExhausted as exc:
            raise WalletError(f"{fn.fn_name}: tx 0x{bytes(tx_hash).hex()} was sent but not mined within "
                              f"{RECEIPT_TIMEOUT_S:.0f}s (is the chain producing blocks?); check it before "
                              "sending again") from exc
        if receipt["status"] != 1:
            raise WalletError(f"{fn.fn_name} reverted (tx 0x{bytes(tx_hash).hex()})")
        log.info("%s sent by %s in tx 0x%s (block %s)", fn.fn_name, sender, bytes(tx_hash).hex(),
                 receipt["blockNumber"])
        return receipt
