"""Deploys the whole contract set to a JSON-RPC chain and writes deployments/<chainId>.json.

Artifacts are the package's own (protocol/artifacts, see contract_artifacts), so an installed
wheel deploys without a checkout; in a checkout they are recompiled first when stale. The deployer signs with a keystore account, or with an account the node
unlocks (anvil's funded accounts) when no keystore is given.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract import Contract
from web3.middleware import SignAndSendRawMiddlewareBuilder

from protocol.deployments import Deployment, DeployedContract
from unchained_cli import contract_artifacts

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEPLOYMENTS_DIR = REPO_ROOT / "deployments"

DAY = 24 * 3600
HOUR = 3600


class DeployError(RuntimeError):
    """The contract set could not be deployed."""


@dataclass(frozen=True)
class DeployParams:
    """Protocol parameters fixed at deployment (all amounts in wei, durations in seconds)."""

    treasury: str | None = None  # defaults to the deployer
    min_provider_stake: int = Web3.to_wei(1, "ether")
    min_verifier_stake: int = Web3.to_wei(1, "ether")
    unbonding_delay: int = 7 * DAY  # longer than every window below, so stake can still be slashed
    slash_reward_bps: int = 5_000
    protocol_fee_bps: int = 200
    challenge_window: int = 1 * HOUR
    pog_commit_window: int = 10 * 60
    root_challenge_period: int = 1 * DAY
    min_bond: int = Web3.to_wei(0.1, "ether")
    response_window: int = 30 * 60
    fraud_window: int = 30 * 60
    vote_window: int = 1 * HOUR
    escalation_window: int = 30 * 60
    slash_amount: int = Web3.to_wei(1, "ether")
    false_claim_slash: int = Web3.to_wei(0.5, "ether")
    quorum_stake: int = Web3.to_wei(1, "ether")
    with_test_stablecoin: bool = True


def ensure_compiled() -> None:
    """In a checkout, recompiles and re-exports the packaged artifacts when the sources changed;
    installed, checks that the package carries them."""
    try:
        contract_artifacts.ensure_fresh()
    except contract_artifacts.ArtifactError as err:
        raise DeployError(str(err)) from err


def load_artifact(name: str) -> dict[str, Any]:
    """The packaged abi and bytecode of contract `name` (read through importlib.resources)."""
    try:
        return contract_artifacts.load(name)
    except contract_artifacts.ArtifactError as err:
        raise DeployError(str(err)) from err


@dataclass
class Deployer:
    """Sends deployment and wiring transactions from one account and records what it deployed."""

    web3: Web3
    sender: str
    deployed: dict[str, DeployedContract] = field(default_factory=dict)
    gas_used: dict[str, int] = field(default_factory=dict)

    @classmethod
    def connect(cls, rpc_url: str, account: LocalAccount | None = None) -> "Deployer":
        web3 = Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": 60}))
        if not web3.is_connected():
            raise DeployError(f"no JSON-RPC node answers at {rpc_url}")
        if account is not None:
            web3.middleware_onion.inject(SignAndSendRawMiddlewareBuilder.build(account), layer=0)
            sender = account.address
        else:
            unlocked = web3.eth.accounts
            if not unlocked:
                raise DeployError("the node unlocks no account: pass --keystore")
            sender = unlocked[0]
        web3.eth.default_account = sender
        return cls(web3=web3, sender=sender)

    def _wait(self, tx_hash: bytes, what: str) -> Any:
        receipt = self.web3.eth.wait_for_transaction_receipt(tx_hash, timeout=120)
        if receipt.status != 1:
            raise DeployError(f"{what} reverted (tx {tx_hash.hex()})")
        self.gas_used[what] = receipt.gasUsed
        return receipt

    def deploy(self, name: str, *args: Any) -> Contract:
        artifact = load_artifact(name)
        factory = self.web3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
        receipt = self._wait(factory.constructor(*args).transact({"from": self.sender}), f"deploy {name}")
        address = receipt.contractAddress
        log.info("deployed %s at %s (gas %s)", name, address, receipt.gasUsed)
        self.deployed[name] = DeployedContract(
            address=address, abi=artifact["abi"], block=receipt.blockNumber
        )
        return self.web3.eth.contract(address=address, abi=artifact["abi"])

    def call(self, contract: Contract, fn: str, *args: Any) -> None:
        tx = getattr(contract.functions, fn)(*args).transact({"from": self.sender})
        self._wait(tx, f"{fn}")


def deploy_all(deployer: Deployer, params: DeployParams = DeployParams()) -> Deployment:
    """Deploys and wires the contract set; returns what deployments/<chainId>.json records."""
    ensure_compiled()
    p = params
    treasury = p.treasury or deployer.sender
    staking = deployer.deploy("Staking", p.unbonding_delay, p.slash_reward_bps, treasury)
    registry = deployer.deploy("ProviderRegistry", staking.address, p.min_provider_stake)
    escrow = deployer.deploy("JobEscrow", registry.address, treasury, p.challenge_window, p.protocol_fee_bps)
    deployer.deploy("LeaseManager", registry.address)
    pog = deployer.deploy(
        "ProofOfGpu", staking.address, registry.address, p.min_verifier_stake,
        p.pog_commit_window, p.root_challenge_period,
    )
    committee = deployer.deploy(
        "DisputeCommittee", deployer.sender, staking.address, p.min_verifier_stake, p.quorum_stake, p.vote_window
    )
    challenges = deployer.deploy("ChallengeManager", (
        staking.address, pog.address, escrow.address, committee.address, treasury,
        p.min_bond, p.min_verifier_stake, p.slash_amount, p.false_claim_slash, p.protocol_fee_bps,
        p.response_window, p.fraud_window, p.escalation_window,
    ))
    # Who may do what: only the challenge contract slashes and freezes escrow, only the PoG
    # contract records PoG results, only the challenge contract opens committee disputes.
    for contract, role, grantee in (
        (staking, "SLASHER_ROLE", challenges),
        (escrow, "DISPUTE_ROLE", challenges),
        (registry, "POG_ROLE", pog),
        (committee, "OPENER_ROLE", challenges),
    ):
        role_id = getattr(contract.functions, role)().call()
        deployer.call(contract, "grantRole", role_id, grantee.address)
    if p.with_test_stablecoin:
        deployer.deploy("TestStablecoin")
    return Deployment(
        chain_id=deployer.web3.eth.chain_id,
        deployer=deployer.sender,
        contracts=dict(deployer.deployed),
    )


def write_deployment(deployment: Deployment, directory: Path = DEPLOYMENTS_DIR) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{deployment.chain_id}.json"
    path.write_text(json.dumps(deployment.to_json(), indent=2))
    return path

