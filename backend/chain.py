"""The chain as the backend sees it: a web3 connection and the deployment's contracts."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from web3 import Web3
from web3.contract import Contract

from backend.errors import ChainUnavailable
from backend.settings import Settings
from client import contracts
from client.tx import http_web3
from protocol.deployments import Deployment, DeploymentFormatError
from protocol.job_result import EscrowDomain

REPO_ROOT = Path(__file__).resolve().parent.parent


def load_deployment(path: Path) -> Deployment:
    try:
        return Deployment.from_json(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError, DeploymentFormatError) as exc:
        raise ChainUnavailable(f"cannot read deployment {path}: {exc}") from exc


@dataclass
class Chain:
    web3: Web3
    deployment: Deployment
    verifier_ttl_s: float = 0.0  # how long a staked verifier's verdict is trusted (Settings.verifier_check_ttl_s)
    _contracts: contracts.DeployedContracts = field(init=False, repr=False)
    _verifiers: dict[str, float] = field(default_factory=dict, repr=False)  # address -> when found staked

    @classmethod
    def connect(cls, settings: Settings) -> Chain:
        web3 = http_web3(settings.rpc_url, timeout_s=30)
        try:
            chain_id = web3.eth.chain_id
        except Exception as exc:  # requests' connection errors vary by transport
            raise ChainUnavailable(f"no JSON-RPC node answers at {settings.rpc_url} ({type(exc).__name__}): "
                                   "start one (`unchained up`) or pass --rpc URL") from exc
        path = settings.deployment_file or REPO_ROOT / "deployments" / f"{chain_id}.json"
        deployment = load_deployment(path)
        if deployment.chain_id != chain_id:
            raise ChainUnavailable(f"{path} is for chain {deployment.chain_id}, the node is chain {chain_id}")
        return cls(web3, deployment, settings.verifier_check_ttl_s)

    def __post_init__(self) -> None:
        self._contracts = contracts.DeployedContracts(self.web3, self.deployment)

    def contract(self, name: str) -> Contract:
        return self._contracts(name)

    def escrow_domain(self) -> EscrowDomain:
        """JobEscrow's EIP-712 domain, under which providers sign job results (no chain read)."""
        return EscrowDomain(self.deployment.chain_id, self.deployment.contract("JobEscrow").address)

    def is_staked_verifier(self, address: str) -> bool:
        """Whether `address` has bonded at least the verifiers' minimum stake and is not a
        registered provider: such an account audits jobs, so it may read their inputs, private
        models and outputs. Providers stake through the same contract; without the registry
        check any provider could read its competitors' private models. A yes is kept for
        `verifier_ttl_s` (an audit asks for every file it reads); a no is asked again each time,
        so a verifier that has just staked is let in at once."""
        key = address.lower()
        found = self._verifiers.get(key)
        if found is not None and time.monotonic() - found < self.verifier_ttl_s:
            return True
        try:
            account = Web3.to_checksum_address(address)
            if self.contract("ProviderRegistry").functions.isRegistered(account).call():
                return False
            required = self.contract("ProofOfGpu").functions.minVerifierStake().call()
            staked = self.contract("Staking").functions.stakeOf(account).call() >= required
        except Exception as exc:  # requests' connection errors vary by transport
            raise ChainUnavailable(f"cannot read the stake of {address}: {exc}") from exc
        if staked:
            self._verifiers[key] = time.monotonic()
        else:
            self._verifiers.pop(key, None)
        return staked
