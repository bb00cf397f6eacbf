"""One party's view of a deployed contract set: the one chain context every service builds on.

A `ChainContext` is a web3 connection, the deployment the party trusts and that deployment's
contracts bound to the connection (`client.contracts.DeployedContracts`). The deployment is read
by the one loader, `client.deployment_file.load_deployment`, with one default: `deployments/<chainId>.json` in the
current directory, where `unchained deploy` writes it. The services' chain objects (the
provider's, the verifier's, the backend's, the renter's wallet, the dev tools' session) are
ChainContexts that add only their own reads and actions; signing stays with each account's one
`client.tx.TxSender`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import cast

from web3 import Web3
from web3 import HTTPProvider
from web3.contract import Contract

from client import blocks, contracts
from client.deployment_file import DEPLOYMENTS_DIR, deployment_path, load_deployment
from client.node_reads import NodeReader
from client.tx import connect
from protocol.deployments import Deployment
from protocol.job_result import EscrowDomain

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

    @functools.cached_property
    def reader(self) -> NodeReader:
        """Reads without web3's per-call work (client.node_reads), from the same node."""
        return NodeReader(str(cast(HTTPProvider, self.web3.provider).endpoint_uri))

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
