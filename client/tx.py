"""One transaction sender per account, used by every party (provider, verifier, renter, deployer).

As go-livepeer's eth client does, the sender owns what every transaction needs, so the services
above it only ask for an action (`sender.send(contract.functions.stake(), value=...)`):

- the nonce, kept here under a lock (the provider's heartbeat thread and its Celery task send
  at once) and checked against the node's pending count before each send: a higher count means
  someone else used the account, a lower one with nothing of ours in flight means our
  transactions were dropped (a reorg, a reverted snapshot); after "nonce too low" /
  "replacement transaction underpriced" the send is tried once more with a fresh nonce;
- fees: EIP-1559 from the node (twice the latest base fee plus its suggested priority fee,
  enough for six full blocks of base-fee rise), or a legacy gas price on a node without a base fee;
- gas: estimated on the pending block, where the transaction will run (on the latest block a
  call reading that block's own hash, a round's or challenge's randomness, would be refused),
  plus a fifth and one fresh storage write, since state and time may change between the
  estimate and the block (ending a lease a second later credits the provider: a new slot);
- the estimate, the pending count and the fees read in one JSON-RPC batch (call by call from a
  node that refuses batches);
- the receipt, polled with a bound (a node with a block time mines it later, a stalled one never);
- reverts, at the estimate or mined, decoded once against every contract's custom errors
  (`client.reverts`) into `TransactionReverted(error=..., error_args=...)`.

Keys: a `LocalAccount` (from `client.keystore`) signs here and the node only relays raw
transactions. An address string instead means an account the node unlocks (anvil's funded
dev accounts): `unchained deploy` without --keystore, the demo and the benchmarks act that way.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, cast

from eth_abi.exceptions import EncodingError
from eth_abi.grammar import ABIType, BasicType, TupleType, parse
from eth_account.signers.local import LocalAccount
from eth_utils import get_abi_input_types
from eth_typing import HexStr
from hexbytes import HexBytes
from web3 import Web3
from web3.contract.contract import ContractConstructor, ContractFunction
from web3.exceptions import ContractLogicError, TransactionIndexingInProgress, TransactionNotFound, Web3RPCError
# Private: web3 has no public reading of a raw batch answer's revert (tests/client/test_web3_private.py).
from web3._utils.error_formatters_utils import raise_contract_logic_error_on_revert
from web3.providers import JSONBaseProvider
from web3.types import RPCEndpoint, TxParams, TxReceipt, Wei

from client.contracts import bind
from client.errors import NodeUnavailable, TransactionNotMined, TransactionRefused, TransactionReverted
from client.reverts import Revert, revert_of
from client.rpc_session import rpc_session
from protocol.deployments import Deployment

logger = logging.getLogger(__name__)

RECEIPT_TIMEOUT_S = 120.0  # many blocks on any chain; a transaction not mined by then is reported
POLL_S = 0.05
# A node that mines each transaction at once (anvil) answers the hash a moment before its receipt:
# the receipt is asked for again after FIRST_POLL_S, then twice as long each time up to POLL_S
# (a fixed POLL_S put 50 ms on one renter funding in four).
FIRST_POLL_S = 0.002
GAS_HEADROOM = 25_000  # one storage slot written from zero (22,100) that the estimate did not see
# What nodes (geth, anvil, hardhat) say when the nonce we used is taken or queued already.
_STALE_NONCE = ("nonce too low", "replacement transaction underpriced", "already known", "nonce has already been used")


def http_web3(rpc_url: str, timeout_s: float = 60.0) -> Web3:
    """A web3 over HTTP that asks the node its chain id once per thread: web3's validation
    middleware reads it before every eth_call and gas estimate, which without the cache doubles
    the calls each party makes (a tenth of a provider agent's and a sixth of a verifier's CPU
    under load). A node does not change chains under a running party. Its HTTP session is
    `client.rpc_session`'s: kept-alive standard-library connections to a node reached directly."""
    provider = Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": timeout_s}, session=rpc_session(rpc_url),
                                 cache_allowed_requests=True, cacheable_requests={RPCEndpoint("eth_chainId")})
    return Web3(provider)


def connect(rpc_url: str, timeout_s: float = 60.0) -> Web3:
    """A web3 connection to `rpc_url` (http_web3) that has answered once (its chain id)."""
    web3 = http_web3(rpc_url, timeout_s)
    try:
        web3.eth.chain_id  # noqa: B018  the read is the check: does a node answer?
    except Exception as exc:  # connection refused, DNS, HTTP errors: all mean "no node"
        raise NodeUnavailable(f"no JSON-RPC node answers at {rpc_url} ({type(exc).__name__}): "
                              "start one (`unchained up`) or pass --rpc URL") from exc
    return web3


def _hex(tx_hash: bytes | str) -> str:
    return "0x" + HexBytes(tx_hash).hex().removeprefix("0x")


class TxSender:
    """Sends the transactions of one account; thread-safe."""

    def __init__(self, web3: Web3, account: LocalAccount | str, deployment: Deployment | None = None,
                 receipt_timeout_s: float = RECEIPT_TIMEOUT_S) -> None:
        self.web3 = web3
        self.account = account
        self.address = Web3.to_checksum_address(account if isinstance(account, str) else account.address)
        # Deployed ABIs decode reverts beside the packaged ones (a deployment of another version).
        self.abis = [c.abi for c in deployment.contracts.values()] if deployment else []
        self.receipt_timeout_s = receipt_timeout_s
        self._lock = threading.Lock()
        self._nonce: int | None = None  # the next nonce to use; None: read the node's pending count
        self._in_flight: set[str] = set()  # broadcast, receipt not seen yet
        self._chain_id: int | None = None

    def send(self, call: ContractFunction | ContractConstructor, value: int = 0, what: str | None = None) -> TxReceipt:
        """Sends `call` (a bound contract function, or a constructor to deploy) and returns its
        receipt once mined with success."""
        what = what or _name(call)
        return self.mined(self.broadcast(call, value, what), what)

    def broadcast(self, call: ContractFunction | ContractConstructor, value: int = 0,
                  what: str | None = None) -> HexBytes:
        """Signs and sends `call` without waiting for it to be mined (for a reveal whose timing
        matters: the caller does its part while the block is produced, then calls `mined`)."""
        what = what or _name(call)
        fields: TxParams = {"from": self.address, "value": Wei(value), "data": calldata(call)}
        if isinstance(call, ContractFunction):
            fields["to"] = call.address
        with self._lock:
            try:
                gas, pending, fees = self._prepare(fields, what)
                try:
                    return self._send_next(fields, gas, pending, fees)
                except Web3RPCError as exc:
                    if not any(s in str(exc).lower() for s in _STALE_NONCE):
                        raise self._refused(what, exc) from exc
                logger.info("%s: the nonce of %s was taken already (another sender); resynced from the node",
                            what, self.address)
                try:
                    return self._send_next(fields, gas, self.web3.eth.get_transaction_count(self.address, "pending"),
                                           fees)
                except Web3RPCError as exc:
                    raise self._refused(what, exc) from exc
            except OSError as exc:  # requests' connection errors are OSErrors
                self._nonce = None
                raise NodeUnavailable(f"{what}: the node does not answer ({type(exc).__name__}: {exc})") from exc

    def gas_cost(self, call: ContractFunction, value: int = 0) -> int:
        """The wei sending `call` now would likely cost: its gas estimate times what a block
        charges now (base fee plus the tip; `broadcast` caps the fee higher, but a transaction
        pays only the block's price). Raises as `broadcast` does for a call that would revert."""
        what = _name(call)
        fields: TxParams = {"from": self.address, "value": Wei(value), "data": calldata(call), "to": call.address}
        try:
            gas = self.web3.eth.estimate_gas(fields, "pending")
        except ContractLogicError as exc:
            raise self._reverted(what, exc) from exc
        except Web3RPCError as exc:
            raise self._refused(what, exc) from exc
        base = self.web3.eth.get_block("latest").get("baseFeePerGas")
        if base is None:  # a node before London: legacy pricing
            return gas * self.web3.eth.gas_price
        return gas * (base + self.web3.eth.max_priority_fee)

    def mined(self, tx_hash: bytes | str, what: str) -> TxReceipt:
        """The receipt of a broadcast transaction, polled for up to receipt_timeout_s; raises
        TransactionReverted (decoded) when it was mined with status 0."""
        try:
            receipt = self._receipt(HexBytes(tx_hash), what)
        except OSError as exc:
            raise NodeUnavailable(f"{what}: the node does not answer while tx {_hex(tx_hash)} is pending "
                                  f"({type(exc).__name__})") from exc
        finally:
            with self._lock:
                self._in_flight.discard(_hex(tx_hash))
        if receipt["status"] != 1:
            revert = self._replay(tx_hash, receipt)
            raise TransactionReverted(what, revert.error, revert.args, revert.text, _hex(tx_hash))
        logger.info("%s: tx %s in block %s (gas %s) from %s", what, _hex(tx_hash), receipt["blockNumber"],
                    receipt["gasUsed"], self.address)
        return receipt

    def _receipt(self, tx_hash: HexBytes, what: str) -> TxReceipt:
        deadline = time.monotonic() + self.receipt_timeout_s
        pause = FIRST_POLL_S
        while True:
            try:
                return self.web3.eth.get_transaction_receipt(tx_hash)
            except (TransactionNotFound, TransactionIndexingInProgress):
                pass
            left = deadline - time.monotonic()
            if left <= 0:
                raise TransactionNotMined(what, _hex(tx_hash), self.receipt_timeout_s)
            time.sleep(min(pause, left))
            pause = min(2 * pause, POLL_S)

    # -- the parts of a transaction -------------------------------------------------------

    def _prepare(self, fields: TxParams, what: str) -> tuple[int, int, dict[str, int]]:
        """The gas to give, the account's pending transaction count and the fees, read in one
        round trip: four calls through web3 were about half of a transaction's CPU in a provider
        agent and a renter's wallet under load. A node that refuses batches is asked call by call."""
        call: dict[str, Any] = {"from": fields["from"], "value": hex(int(fields.get("value", 0))),
                                "data": fields["data"]}
        if "to" in fields:
            call["to"] = fields["to"]
        provider = cast(JSONBaseProvider, self.web3.provider)  # an HTTP provider (http_web3) batches
        answers = provider.make_batch_request([
            (RPCEndpoint("eth_estimateGas"), [call, "pending"]),
            (RPCEndpoint("eth_getTransactionCount"), [self.address, "pending"]),
            (RPCEndpoint("eth_getBlockByNumber"), ["latest", False]),
            (RPCEndpoint("eth_maxPriorityFeePerGas"), []),
        ])
        if not isinstance(answers, list):
            gas = self._estimate(fields, what)
            return gas, self.web3.eth.get_transaction_count(self.address, "pending"), self._fees()
        estimate, count, block, priority = sorted(answers, key=lambda a: int(str(a["id"])))
        if "error" in estimate:
            try:
                raise_contract_logic_error_on_revert(estimate)  # web3's own reading of an estimate's error
            except ContractLogicError as exc:
                raise self._reverted(what, exc) from exc
            raise self._refused(what, Web3RPCError(str(estimate["error"]), rpc_response=estimate))
        if "error" in count:
            raise self._refused(what, Web3RPCError(str(count["error"]), rpc_response=count))
        gas, pending = _with_headroom(int(estimate["result"], 16)), int(count["result"], 16)
        base = (block.get("result") or {}).get("baseFeePerGas")
        if base is None or "error" in priority:  # before London, or no eth_maxPriorityFeePerGas: web3's way
            return gas, pending, self._fees()
        return gas, pending, _eip1559_fees(int(base, 16), int(priority["result"], 16))

    def _estimate(self, fields: TxParams, what: str) -> int:
        try:
            return _with_headroom(self.web3.eth.estimate_gas(fields, "pending"))
        except ContractLogicError as exc:
            raise self._reverted(what, exc) from exc
        except Web3RPCError as exc:  # e.g. insufficient funds for the value
            raise self._refused(what, exc) from exc

    def _reverted(self, what: str, exc: ContractLogicError) -> TransactionReverted:
        revert = revert_of(exc, self.abis)
        return TransactionReverted(what, revert.error, revert.args, revert.text)

    def _send_next(self, fields: TxParams, gas: int, pending: int, fees: dict[str, int]) -> HexBytes:
        """Sends with the next nonce (under the lock); any refusal makes the next send resync it.
        `pending`: the node's pending transaction count for the account, read just before."""
        # Ours, unless the node knows better: a higher pending count means someone else used the
        # account; a lower one with nothing of ours in flight means our transactions were dropped
        # (a reorg, a restarted node): a nonce above the node's would wait in its queue forever.
        if self._nonce is None or self._nonce < pending or (self._nonce > pending and not self._in_flight):
            self._nonce = pending
        try:
            tx_hash = self._submit({**fields, "gas": gas, "nonce": self._nonce, "chainId": self._chain(), **fees})
        except Exception:
            self._nonce = None
            raise
        self._nonce += 1
        self._in_flight.add(_hex(tx_hash))
        return tx_hash

    def _refused(self, what: str, exc: Web3RPCError) -> TransactionRefused:
        return TransactionRefused(f"the node refused {what} from {self.address}: {_rpc_message(exc)}")

    def _chain(self) -> int:
        if self._chain_id is None:
            self._chain_id = self.web3.eth.chain_id
        return self._chain_id

    def _fees(self) -> dict[str, int]:
        base = self.web3.eth.get_block("latest").get("baseFeePerGas")
        if base is None:  # a node before London: legacy pricing
            return {"gasPrice": self.web3.eth.gas_price}
        return _eip1559_fees(base, self.web3.eth.max_priority_fee)

    def _submit(self, tx: dict[str, Any]) -> HexBytes:
        if isinstance(self.account, str):
            return self.web3.eth.send_transaction(tx)  # type: ignore[arg-type]
        return self.web3.eth.send_raw_transaction(self.account.sign_transaction(tx).raw_transaction)

    def _replay(self, tx_hash: bytes | str, receipt: TxReceipt) -> Revert:
        """Why a mined transaction reverted: the node keeps no reason, so the call is replayed on
        the state after its block (where a race that made it fail, e.g. someone settling first,
        is visible)."""
        tx = self.web3.eth.get_transaction(HexBytes(tx_hash))
        if receipt["gasUsed"] >= tx["gas"]:
            return Revert(None, {}, f"out of gas (it used all of its limit, {tx['gas']})")
        call: TxParams = {"from": tx["from"], "data": tx["input"], "value": tx["value"], "gas": tx["gas"]}
        if tx.get("to"):
            call["to"] = tx["to"]
        try:
            self.web3.eth.call(call, receipt["blockNumber"])
        except ContractLogicError as exc:
            return revert_of(exc, self.abis)
        except Web3RPCError as exc:
            return Revert(None, {}, f"status 0 ({_rpc_message(exc)})")
        return Revert(None, {}, "status 0 (a replay on the state after its block does not revert)")


def _with_headroom(estimate: int) -> int:
    return estimate + estimate // 5 + GAS_HEADROOM


def _eip1559_fees(base_fee: int, tip: int) -> dict[str, int]:
    """Twice the base fee (six full blocks of its rise) plus the node's suggested tip."""
    return {"maxFeePerGas": 2 * base_fee + tip, "maxPriorityFeePerGas": tip}


def _name(call: ContractFunction | ContractConstructor) -> str:
    return call.fn_name if isinstance(call, ContractFunction) else "deploy"


def calldata(call: ContractFunction | ContractConstructor) -> HexStr:
    """The transaction data of `call`, as web3 encodes it. Arguments already in the codec's own
    form (bytes for bytesN, text for strings, checksummed addresses: what the services pass) go
    straight to web3's codec; web3's normalizing walk of the arguments cost about 1 ms a job of a
    batched commit (10.6 against 0.8 ms for ten jobs). Anything else (hex strings for bytes, ENS
    names, a value the codec refuses) takes web3's own way, with its conversions and errors."""
    if isinstance(call, ContractConstructor):
        return HexStr(call.data_in_transaction)
    types = get_abi_input_types(call.abi)
    if not call.kwargs and all(_checksummed(parse(t), v) for t, v in zip(types, call.arguments)):
        try:
            return HexStr(call.selector + call.w3.codec.encode(types, call.arguments).hex())
        except EncodingError:
            pass
    # The contract's public encoder, with web3's normalizers; building the contract class costs
    # a few ms, paid only on this unusual path.
    contract = bind(call.w3, call.address, cast(list[dict[str, Any]], call.contract_abi))
    encoded: HexStr = contract.encode_abi(call.signature, args=call.arguments)
    return encoded


def _checksummed(abi_type: ABIType, value: Any) -> bool:
    """Whether every address string in `value` is checksummed: web3 refuses the others, and the
    codec would encode them."""
    if abi_type.is_array:
        return isinstance(value, (list, tuple)) and all(_checksummed(abi_type.item_type, v) for v in value)
    if isinstance(abi_type, TupleType):
        return isinstance(value, (list, tuple)) and all(
            _checksummed(t, v) for t, v in zip(abi_type.components, value))
    if isinstance(abi_type, BasicType) and abi_type.base == "address" and isinstance(value, str):
        return Web3.is_checksum_address(value)
    return True


def _rpc_message(exc: Web3RPCError) -> str:
    response = getattr(exc, "rpc_response", None)
    error = response.get("error") if isinstance(response, dict) else None
    return str(error.get("message")) if isinstance(error, dict) and error.get("message") else str(exc)


__all__ = ["POLL_S", "RECEIPT_TIMEOUT_S", "TxSender", "calldata", "connect"]
