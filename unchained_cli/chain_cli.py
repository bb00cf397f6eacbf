"""`unchained chain up` and `unchained deploy`: a local development chain and the contract set on a chain."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table
from web3 import Web3

from client.keystore import PASSWORD_FILE_HELP, load_keystore
from unchained_cli.chain import LocalChain, stop_on_sigterm
from unchained_cli.deploy import Deployer, deploy_all, write_deployment

chain_app = typer.Typer(help="A local development chain (anvil).", no_args_is_help=True)
console = Console()


@chain_app.command("up")
def chain_up(
    port: Annotated[int, typer.Option(help="JSON-RPC port.")] = 8545,
    block_time: Annotated[float, typer.Option(
        min=0, help="Seconds per block (blocks come on their own, so confirmations and PoG rounds "
                    "progress); 0: a block only when a transaction arrives.")] = 1.0,
) -> None:
    """Start anvil, print its RPC URL and funded accounts, and run until Ctrl-C or SIGTERM."""
    stop_on_sigterm()
    chain = LocalChain(port=port, block_time=block_time or None).start()
    try:
        web3 = Web3(Web3.HTTPProvider(chain.rpc_url))
        table = Table(title=f"anvil at {chain.rpc_url} (chain id {web3.eth.chain_id})")
        table.add_column("#")
        table.add_column("account")
        table.add_column("balance (ETH)", justify="right")
        for i, account in enumerate(web3.eth.accounts):
            table.add_row(str(i), account, f"{Web3.from_wei(web3.eth.get_balance(account), 'ether'):,}")
        console.print(f"RPC URL: {chain.rpc_url}")
        console.print(f"Blocks: every {block_time:g} s" if block_time else
                      "Blocks: one per transaction (nothing else moves the chain: confirmations and "
                      "PoG rounds wait for the next transaction)")
        console.print(table)
        console.print("Private keys: anvil's default test mnemonic ('test test ... junk'); development only.")
        while chain.process and chain.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        chain.stop()


def deploy(
    rpc: Annotated[str, typer.Option(help="JSON-RPC URL of the chain.")] = "http://127.0.0.1:8545",
    keystore: Annotated[Optional[Path], typer.Option(help="Deployer keystore (eth-account JSON); default: the node's first unlocked account.")] = None,
    password_file: Annotated[Optional[Path], typer.Option("--password-file", dir_okay=False, help=PASSWORD_FILE_HELP)] = None,
    out: Annotated[Path, typer.Option(help="Directory for <chainId>.json.")] = Path("deployments"),
) -> None:
    """Deploy the whole contract set and write deployments/<chainId>.json (addresses and ABIs)."""
    account = load_keystore(keystore, password_file) if keystore is not None else None
    deployer = Deployer.connect(rpc, account)
    with console.status("deploying contracts"):
        deployment = deploy_all(deployer)
    path = write_deployment(deployment, out)
    table = Table(title=f"chain {deployment.chain_id}: deployed by {deployment.deployer}")
    table.add_column("contract")
    table.add_column("address")
    table.add_column("gas", justify="right")
    for name, contract in deployment.contracts.items():
        table.add_row(name, contract.address, f"{deployer.gas_used.get(f'deploy {name}', 0):,}")
    console.print(table)
    operator = deployment.operator
    console.print(f"the operator keeps {operator['keeps']}")
    console.print(f"  treasury {operator['treasury']} receives: "
                  + ", ".join(f"{k} {v}" for k, v in operator["treasuryReceives"].items()))
    for contract, roles in operator["roles"].items():
        for role, holders in roles.items():
            console.print(f"  {contract}.{role}: {', '.join(holders)} (granted once; nobody can grant more)")
    console.print(f"wrote {path}")


