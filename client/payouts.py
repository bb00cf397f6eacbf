"""Every balance the contracts owe one account, and the transactions that pay it out.

The contracts pay by pull: JobEscrow per token (address(0) = ETH), LeaseManager,
ChallengeManager and Staking keep an owed balance per account, and Staking releases unbonded
stake once its delay has passed. `owed_to` reads them all (JobEscrow's tokens: ETH, the ones
named, and every token of a job the account was renter or provider of), through
client.node_reads (no web3: `unchained balance` starts without it); `Payout.function` is the
contract call that pays one out, for the caller's own signer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from eth_abi import decode
from eth_utils import to_checksum_address

from client.errors import PayoutError
from client.node_reads import LATEST_BLOCK, NodeReader, View, event_topic
from protocol.deployments import Deployment

ETH_TOKEN = "0x" + "00" * 20
SIMPLE_BALANCES = ("LeaseManager", "ChallengeManager", "Staking")  # owedTo(account) / withdraw()
OWED, UNBONDED = "owed balance", "unbonded stake"
_ERC20_ABI = [
    {"type": "function", "name": "symbol", "stateMutability": "view", "inputs": [],
     "outputs": [{"name": "", "type": "string"}]},
    {"type": "function", "name": "decimals", "stateMutability": "view", "inputs": [],
     "outputs": [{"name": "", "type": "uint8"}]},
]


@dataclass(frozen=True)
class Payout:
    """One balance to withdraw: `amount` in wei (ETH) or in the token's smallest unit."""

    contract: str
    what: str  # "owed balance", "unbonded stake"
    amount: int
    token: str = ETH_TOKEN
    symbol: str = "ETH"
    decimals: int = 18

    def shown(self) -> str:
        """`1.25 ETH` or `3.5 tUSD`: whole units, every significant digit kept."""
        whole, frac = divmod(self.amount, 10**self.decimals)
        digits = f"{frac:0{self.decimals}d}".rstrip("0") if self.decimals else ""
        return f"{whole}{'.' + digits if digits else ''} {self.symbol}"

    def function(self, contract: Callable[[str], Any]) -> Any:
        """The web3 contract function that pays it out; `contract(name)` binds the deployment's
        contract (ChainContext.contract)."""
        functions = contract(self.contract).functions
        if self.what == UNBONDED:
            return functions.withdrawUnbonded()
        return functions.withdraw(self.token) if self.contract == "JobEscrow" else functions.withdraw()


@dataclass(frozen=True)
class Unbonding:
    """Stake still in its unbonding delay: not payable before `release_at` (unix seconds)."""

    amount: int
    release_at: int


@dataclass(frozen=True)
class Owed:
    payable: list[Payout]
    waiting: Unbonding | None  # unbonding stake whose delay has not passed yet
    now: int  # the latest block's timestamp: the chain's clock, which `waiting` is measured on


def _job_tokens(reader: NodeReader, deployment: Deployment, account: str) -> set[str]:
    """Tokens of every job `account` rented or served: its escrow balances can only be in those.
    JobCreated names the renter and the provider in its topics, so the node filters them."""
    escrow = deployment.contract("JobEscrow")
    [event] = [e for e in escrow.abi if e.get("type") == "event" and e.get("name") == "JobCreated"]
    data = [p for p in event["inputs"] if not p.get("indexed")]
    token_at = [p["name"] for p in data].index("token")
    topic, me = event_topic(escrow.abi, "JobCreated"), "0x" + account[2:].lower().rjust(64, "0")
    logs = reader.logs(escrow.address, [[topic, None, me], [topic, None, None, me]], escrow.block)
    return {to_checksum_address(decode([p["type"] for p in data], bytes.fromhex(log["data"][2:]))[token_at])
            for log in logs}


def _token_display(reader: NodeReader, token: str) -> tuple[str, int]:
    """(symbol, decimals) of an ERC-20, or its address and 0 when it does not say."""
    symbol, decimals = View(token, _ERC20_ABI, "symbol"), View(token, _ERC20_ABI, "decimals")
    try:
        shown, places = reader.batch([symbol.request(), decimals.request()])
        return str(symbol.decode(shown)), int(decimals.decode(places))
    except Exception:  # not every token implements the optional metadata; show raw units then
        return f"units of token {token}", 0


def owed_to(reader: NodeReader, deployment: Deployment, account: str, tokens: Iterable[str] = ()) -> Owed:
    """What `account` can withdraw now, and the stake still unbonding."""
    account = to_checksum_address(account)
    try:
        wanted = {to_checksum_address(t) for t in tokens} | _job_tokens(reader, deployment, account)
        wanted.discard(to_checksum_address(ETH_TOKEN))
        escrow_tokens = [ETH_TOKEN, *sorted(wanted)]
        escrow = deployment.contract("JobEscrow")
        escrow_owed = View(escrow.address, escrow.abi, "owedTo")
        simple = [View(deployment.contract(n).address, deployment.contract(n).abi, "owedTo") for n in SIMPLE_BALANCES]
        staking = deployment.contract("Staking")
        unbonding_of = View(staking.address, staking.abi, "unbondingOf")
        *amounts, unbonding, block = reader.batch(
            [escrow_owed.request(t, account) for t in escrow_tokens] + [v.request(account) for v in simple]
            + [unbonding_of.request(account), LATEST_BLOCK])
        payable = []
        for token, amount in zip(escrow_tokens, amounts[:len(escrow_tokens)], strict=True):
            if escrow_owed.decode(amount):
                symbol, decimals = ("ETH", 18) if token == ETH_TOKEN else _token_display(reader, token)
                payable.append(Payout("JobEscrow", OWED, escrow_owed.decode(amount), token, symbol, decimals))
        for name, view, amount in zip(SIMPLE_BALANCES, simple, amounts[len(escrow_tokens):], strict=True):
            if view.decode(amount):
                payable.append(Payout(name, OWED, view.decode(amount)))
        unbonding = unbonding_of.decode(unbonding)
        now = int(block["timestamp"], 16)
        waiting = None
        if unbonding["amount"]:
            # The contract compares with the next block's timestamp, which is at least this one's.
            if unbonding["releaseAt"] <= now:
                payable.append(Payout("Staking", UNBONDED, unbonding["amount"]))
            else:
                waiting = Unbonding(unbonding["amount"], unbonding["releaseAt"])
    except PayoutError:
        raise
    except Exception as exc:  # transport and decoding errors vary by provider
        raise PayoutError(f"cannot read the balances owed to {account}: {exc}") from exc
    return Owed(payable, waiting, now)


__all__ = ["ETH_TOKEN", "Owed", "Payout", "Unbonding", "owed_to"]
