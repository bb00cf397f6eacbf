"""`unchained withdraw`: pays out every balance the contracts owe the caller, one line each.

JobEscrow (per token: ETH, tokens named with --token, and the token of every job the caller
rented or served), LeaseManager, ChallengeManager, Staking's owed balance, and unbonded stake
whose delay has passed (client.payouts). Each is a transaction signed with the caller's own
keystore; nothing is sent when nothing is owed.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from web3 import Web3

from renter.wallet import Wallet
from client.keystore import PASSWORD_FILE_HELP, load_keystore
from client.payouts import ETH_TOKEN, Payout, owed_to
from unchained_cli.errors import BadOption


def _when(timestamp: int, now: int) -> str:
    left = max(0, timestamp - now)
    hours, rest = divmod(left, 3600)
    return (f"{datetime.fromtimestamp(timestamp, timezone.utc):%Y-%m-%d %H:%M:%S} UTC "
            f"(in {hours} h {rest // 60} min)")


def withdraw(
    keystore: Annotated[Path, typer.Option("--keystore", exists=True, dir_okay=False,
                                           help="Your eth-account keystore: the account paid out.")],
    password_file: Annotated[Optional[Path], typer.Option("--password-file", dir_okay=False,
                                                          help=PASSWORD_FILE_HELP)] = None,
    rpc: Annotated[str, typer.Option("--rpc", envvar="UNCHAINED_RPC_URL", help="JSON-RPC URL of the chain.")]
        = "http://127.0.0.1:8545",
    deployment: Annotated[Optional[Path], typer.Option("--deployment",
                                                       help="deployments/<chainId>.json to trust.")] = None,
    token: Annotated[Optional[list[str]], typer.Option(
        "--token", help="Also an ERC-20's JobEscrow balance (repeatable); the tokens of your own jobs are "
                        "found without it.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help=(
        "Withdraw a balance even when its gas would cost more than it pays out (without it, you are asked)."))]
        = False,
) -> None:
    """Withdraw every balance the contracts owe you (escrow, leases, challenges, stake)."""
    for address in token or []:
        if not Web3.is_address(address):
            raise BadOption("--token", f"{address!r} is not an address")
    account = load_keystore(keystore, password_file)
    wallet = Wallet(rpc, account, deployment)
    owed = owed_to(wallet.reader, wallet.deployment, account.address, token or [])
    if not owed.payable:
        typer.echo(f"nothing owed to {account.address}")
    done = 0
    for payout in owed.payable:
        call = payout.function(wallet.contract)
        if not yes and not _worth_it(wallet, payout, call):
            continue
        try:
            receipt = wallet.send(call)
        except Exception:
            if done:  # the boundary explains the failure; this says what went through before it
                typer.echo(f"paid out {done} balance(s) before this failed", err=True)
            raise
        done += 1
        typer.echo(f"{payout.contract} {payout.what}: {payout.shown()} "
                   f"(tx 0x{bytes(receipt['transactionHash']).hex()})")
    if owed.waiting is not None:
        typer.echo(f"Staking: {Web3.from_wei(owed.waiting.amount, 'ether')} ETH still unbonding until "
                   f"{_when(owed.waiting.release_at, owed.now)}; run withdraw again then")


def _worth_it(wallet: Wallet, payout: Payout, call: Any) -> bool:
    """True unless the gas of an ETH withdrawal would cost more than it pays out and the user,
    asked at the terminal, says no. Without a terminal nobody is asked (stdin may be a script's
    next line): the balance stays owed, nothing is lost, and `--yes` pays it out."""
    if payout.token != ETH_TOKEN:
        return True  # gas is paid in ETH: no common unit with a token's amount
    cost = wallet.sender.gas_cost(call)
    if cost <= payout.amount:
        return True
    said = (f"{payout.contract} {payout.what}: {payout.shown()}, but its gas would cost about "
            f"{Web3.from_wei(cost, 'ether')} ETH, more than it pays out")
    if sys.stdin.isatty() and typer.confirm(f"{said}. Withdraw it anyway?", default=False):
        return True
    typer.echo(f"{said}: kept (still owed; `unchained withdraw --yes` pays it out)")
    return False


__all__ = ["withdraw"]
