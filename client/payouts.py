"""Every balance the contracts owe one account, and the transactions that pay it out.

The contracts pay by pull: JobEscrow per token (address(0) = ETH), LeaseManager,
ChallengeManager and Staking keep an owed balance per account, and Staking releases unbonded
stake once its delay has passed. `owed_to` reads them all (JobEscrow's tokens: ETH, the ones
named, and every token of a job the account was renter or provider of); `pay_out` sends one
withdrawal per balance through the caller's own signer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from eth_typing import ChecksumAddress
from web3 import Web3

from client import blocks
from client.contracts import bind, deployed
from client.errors import PayoutError
from client.log_follower import events_between
from protocol.deployments import Deployment

ETH_TOKEN = "0x" + "00" * 20
SIMPLE_BALANCES = ("LeaseManager", "ChallengeManager", "Staking")  # owedTo(account) / withdraw()
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
    call: Any = field(default=None, compare=False, repr=False)  # the web3 function that pays it

    def shown(self) -> str:
        """`1.25 ETH` or `3.5 tUSD`: whole units, every significant digit kept."""
        whole, frac = divmod(self.amount, 10**self.decimals)
        digits = f"{frac:0{self.decimals}d}".rstrip("0") if self.decimals else ""
        return f"{whole}{'.' + digits if digits else ''} {self.symbol}"


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


def _job_tokens(web3: Web3, deployment: Deployment, account: str) -> set[ChecksumAddress]:
    """Tokens of every job `account` rented or served: its escrow balances can only be in those."""
    me = account.lower()
    return {Web3.to_checksum_address(e.args["token"])
            for e in events_between(web3, deployment, {"JobEscrow": ["JobCreated"]}, deployment.contract("JobEscrow").block)
            if me in (e.args["renter"], e.args["provider"])}


def _token_display(web3: Web3, token: str) -> tuple[str, int]:
    """(symbol, decimals) of an ERC-20, or its address and 0 when it does not say."""
    erc20 = bind(web3, token, _ERC20_ABI)
    try:
        return str(erc20.functions.symbol().call()), int(erc20.functions.decimals().call())
    except Exception:  # not every token implements the optional metadata; show raw units then
        return f"units of token {token}", 0


def owed_to(web3: Web3, deployment: Deployment, account: str, tokens: Iterable[str] = ()) -> Owed:
    """What `account` can withdraw now, and the stake still unbonding."""
    account = Web3.to_checksum_address(account)
    try:
        payable = []
        escrow = deployed(web3, deployment, "JobEscrow")
        wanted = {Web3.to_checksum_address(t) for t in tokens}
        wanted |= _job_tokens(web3, deployment, account)
        wanted.discard(Web3.to_checksum_address(ETH_TOKEN))
        for token in [ETH_TOKEN, *sorted(wanted)]:
            amount = escrow.functions.owedTo(token, account).call()
            if amount:
                symbol, decimals = ("ETH", 18) if token == ETH_TOKEN else _token_display(web3, token)
                payable.append(Payout("JobEscrow", "owed balance", amount, token, symbol, decimals,
                                      escrow.functions.withdraw(token)))
        for name in SIMPLE_BALANCES:
            contract = deployed(web3, deployment, name)
            amount = contract.functions.owedTo(account).call()
            if amount:
                payable.append(Payout(name, "owed balance", amount, call=contract.functions.withdraw()))
        staking = deployed(web3, deployment, "Staking")
        unbonding = staking.functions.unbondingOf(account).call()
        waiting = None
        now = blocks.timestamp(web3)
        if unbonding.amount:
            # The contract compares with the next block's timestamp, which is at least this one's.
            if unbonding.releaseAt <= now:
                payable.append(Payout("Staking", "unbonded stake", unbonding.amount,
                                      call=staking.functions.withdrawUnbonded()))
            else:
                waiting = Unbonding(unbonding.amount, unbonding.releaseAt)
    except PayoutError:
        raise
    except Exception as exc:  # transport and decoding errors vary by provider
        raise PayoutError(f"cannot read the balances owed to {account}: {exc}") from exc
    return Owed(payable, waiting, now)


def pay_out(payouts: Iterable[Payout], send: Callable[[Any], Any]) -> list[tuple[Payout, Any]]:
    """Sends each payout's withdrawal with `send` (the caller's signer); returns the receipts."""
    return [(payout, send(payout.call)) for payout in payouts]


__all__ = ["ETH_TOKEN", "Owed", "Payout", "Unbonding", "owed_to", "pay_out"]
