"""One party's view of a deployed contract set: the one chain context every service builds on.

A `ChainContext` is a web3 connection, the deployment the party trusts and that deployment's
contracts bound to the connection (`client.contracts.DeployedContracts`). The deployment is read
by the one loader here, `load_deployment`, with one default: `deployments/<chainId>.json` in the
current directory, where `unchained deploy` writes it. The services' chain objects (the
provider's, the verifier's, the backend's, the renter's wallet, the dev tools' session) are
ChainContexts that add only their own reads and actions; signing stays with each account's one
`client.tx.TxSender`.
"""

from __future__ import annotations

import json
from pathlib import Path

from web3 import Web3
from web3.contract import Contract

from client import blocks, contracts
from client.errors import DeploymentUnreadable
from client.tx import connect
from protocol.deployments import Deployment, DeploymentFormatError
from protocol.job_result import EscrowDomain

DEPLOYMENTS_DIR = Path("deployments")  # relative: the current directory's, as `unchained deploy` writes it


def deployment_path(chain_id: int, file: Path | None = None, directory: Path = DEPLOYMENTS_DIR) -> Path:
    """`file` when given, else `<directory>/<chainId>.json`."""
    return file if file is not None else directory / f"{chain_id}.json"


def load_deployment(chain_id: int, file: Path | None = None, directory: Path = DEPLOYMENTS_DIR) -> Deployment:
    """The deployment to trust on chain `chain_id` (the node's): `file`, or the directory's
    `<chainId>.json`. A document written for another chain is refused: its addresses there hold
    other code, or none."""
    path = deployment_path(chain_id, file, directory)
    try:
        deployment = Deployment.from_json(json.loads(path.read_text()))
    except OSError as exc:
        raise DeploymentUnreadable(path, exc.strerror or str(exc)) from exc
    except (json.JSONDecodeError, DeploymentFormatError) as exc:
        raise DeploymentUnreadable(path, str(exc)) from exc
    if deployment.chain_id != chain_id:
        raise DeploymentUnreadable(path, f"it is for chain {deployment.chain_id}, the node is chain {chain_id}")
    return deployment


def open_chain(rpc_url: str, deployment: Deployment | None = None, deployment_file: Path | None = None,
               deployments_dir: Path = DEPLOYMENTS_DIR, timeout_s: float = 60.0) -> tuple[Web3, Deployment]:
    """A connection to `rpc_url` that has answered (NodeUnavailable otherwise) and the deployment
    to trust on its chain: `deployment` when the caller has it, else the one `load_deployment` reads."""
    web3 = connect(rpc_url, timeout_s)
    if deployment is None:
        deployment = load_deployment(web3.eth.chain_id, deployment_file, deployments_dir)
    return web3, deployment


class ChainContext:
    """A web3 connection, the deployment it trusts, and the deployment's contracts bound to it."""

    def __init__(self, web3: Web3, deployment: Deployment) -> None:
        self.web3 = web3
        self.deployment = deployment
        self._contracts = contracts.DeployedContracts(web3, deployment)

    def contract(self, name: str) -> Contract:
        """The deployment's contract `name`, bound to this connection (built once)."""
        return self._contracts(name)

    def now(self) -> int:
        """The latest block's timestamp: the contracts' clock."""
        return blocks.timestamp(self.web3)

    def escrow_domain(self) -> EscrowDomain:
        """JobEscrow's EIP-712 domain, under which job results are signed (no chain read)."""
        return EscrowDomain(self.deployment.chain_id,
                            Web3.to_checksum_address(self.deployment.contract("JobEscrow").address))


__all__ = ["DEPLOYMENTS_DIR", "ChainContext", "deployment_path", "load_deployment", "open_chain"]
