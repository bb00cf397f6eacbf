"""The verifier's view of the chain: its own signing account and the deployed contracts."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import ContractCustomError, TimeExhausted
from web3.middleware import SignAndSendRawMiddlewareBuilder
from web3.types import TxReceipt

from protocol.deployments import Deployment, describe_revert
from verifier import VerifierError

logger = logging.getLogger(__name__)


class ChainUnavailable(VerifierError):
    """The RPC node does not answer or a transaction was not mined in time (transient)."""


class TransactionReverted(VerifierError):
    """A transaction was refused by a contract; the message names the custom error."""


def gas_with_margin(estimate: int) -> int:
    """An estimate plus a fifth: state may change between the estimate and the block."""
    return estimate + estimate // 5


@dataclass
class VerifierChain:
    web3: Web3
    deployment: Deployment
    address: str
    tx_timeout_s: float = 120.0
    # Concurrent PoG rounds send from threads: the signing middleware reads the pending nonce,
    # so two sends at once would take the same one and the second would be refused.
    _nonce_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def connect(cls, rpc_url: str, deployment: Deployment, account: LocalAccount | None = None,
                unlocked_sender: str | None = None) -> "VerifierChain":
        """Signs with `account`; `unlocked_sender` (a node-unlocked dev account) is for local chains."""
        web3 = Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": 30}))
        if account is not None:
            web3.middleware_onion.inject(SignAndSendRawMiddlewareBuilder.build(account), layer=0)
            address = account.address
        elif unlocked_sender is not None:
            address = Web3.to_checksum_address(unlocked_sender)
        else:
            raise VerifierError("a verifier needs its own account (keystore)")
        return cls(web3, deployment, address)

    def contract(self, name: str) -> Contract:
        deployed = self.deployment.contract(name)
        return self.web3.eth.contract(address=deployed.address, abi=deployed.abi)

    def send(self, fn: Any, value: int = 0) -> TxReceipt:
        """Sends a contract call from the verifier's account and waits for it to be mined."""
        return self.mined(self.broadcast(fn, value), fn.fn_name)

    def _gas(self, fn: Any, value: int) -> int:
        """Gas estimated on the pending block, where the transaction will run: a node estimating
        on the latest block would refuse a call that reads that block's own hash (a round's or
        challenge's randomness), though the transaction itself, mined later, can read it."""
        return gas_with_margin(fn.estimate_gas({"from": self.address, "value": value}, block_identifier="pending"))

    def broadcast(self, fn: Any, value: int = 0) -> bytes:
        """Sends a contract call and returns its hash without waiting for it to be mined (for a
        reveal whose timing matters: the caller does its part while the block is produced, then
        calls `mined`). A call the node refuses at once raises TransactionReverted."""
        try:
            with self._nonce_lock:
                return bytes(fn.transact({"from": self.address, "value": value, "gas": self._gas(fn, value)}))
        except ContractCustomError as exc:
            raise TransactionReverted(f"{fn.fn_name}: {describe_revert(self.deployment, exc.data)}") from exc
        except (ConnectionError, OSError) as exc:
            raise ChainUnavailable(f"{fn.fn_name}: {exc}") from exc

    def mined(self, tx_hash: bytes, what: str) -> TxReceipt:
        """The receipt of a broadcast transaction, polled for up to tx_timeout_s."""
        try:
            receipt = self.web3.eth.wait_for_transaction_receipt(tx_hash, timeout=self.tx_timeout_s)
        except TimeExhausted as exc:
            raise ChainUnavailable(f"{what}: tx {tx_hash.hex()} not mined in {self.tx_timeout_s}s") from exc
        if receipt.status != 1:
            raise TransactionReverted(f"{what} reverted in tx {tx_hash.hex()}")
        logger.info("%s mined: tx %s, gas %s", what, tx_hash.hex(), receipt.gasUsed)
        return receipt

    def now(self) -> int:
        return self.web3.eth.get_block("latest")["timestamp"]
