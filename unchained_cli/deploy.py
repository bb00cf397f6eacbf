"""Deploys the whole contract set to a JSON-RPC chain and writes deployments/<chainId>.json.

Every role is granted once, by the `wire` call of each contract, to the contracts that need it;
after that nobody (the deployer included) can grant or revoke a role, and no contract has a
setter. The operator keeps only the treasury address that receives fees; `operator_summary`
says so, after reading it back from the chain, and the deployment file records it.

Artifacts are the package's own (protocol/artifacts, see contract_artifacts), so an installed
wheel deploys without a checkout; in a checkout they are recompiled first when stale. The
deployer signs with a keystore account, or with an account the node
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

from client import contracts
from client.tx import TxSender, connect
from protocol.deployments import Deployment, DeployedContract
from unchained_cli import contract_artifacts
from unchained_cli.errors import CliError

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEPLOYMENTS_DIR = REPO_ROOT / "deployments"

DAY = 24 * 3600
HOUR = 3600


class DeployError(CliError):
    """The contract set could not be deployed."""


@dataclass(frozen=True)
class DeployParams:
    """Protocol parameters fixed at deployment (all amounts in wei, durations in seconds)."""

    treasury: str | None = None  # defaults to the deployer
    min_provider_stake: int = Web3.to_wei(1, "ether")
    min_verifier_stake: int = Web3.to_wei(1, "ether")
    # Longer than every window below, so stake can still be slashed; JobEscrow requires at least
    # max_job_duration + challenge_window (a signed result's slash window after the latest deadline).
    unbonding_delay: int = 8 * DAY
    slash_reward_bps: int = 5_000
    protocol_fee_bps: int = 200
    challenge_window: int = 1 * HOUR
    max_job_duration: int = 7 * DAY  # a job's deadline is at most this far from its funding
    # requestCancel -> cancel; well above the provider committer's interval (a few seconds), so a
    # renter holding a signed result cannot cancel before the provider's commit lands
    cancel_grace: int = 10 * 60
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

    def check(self) -> None:
        """Refuses, before anything is deployed, what JobEscrow's constructor would: stake bonded
        when a job is funded must stay slashable for a challenge window after the latest deadline
        (a signed result never committed), so the unbonding delay covers both."""
        needed = self.max_job_duration + self.challenge_window
        if self.unbonding_delay < needed:
            raise DeployError(f"unbonding delay {self.unbonding_delay} s is shorter than the longest job "
                              f"({self.max_job_duration} s) plus the challenge window ({self.challenge_window} s): "
                              f"a provider could sign a result, never commit it and take its stake out before "
                              f"the renter can slash it; use at least {needed} s or shorter jobs")


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

    sender: TxSender
    deployed: dict[str, DeployedContract] = field(default_factory=dict)
    gas_used: dict[str, int] = field(default_factory=dict)

    @classmethod
    def connect(cls, rpc_url: str, account: LocalAccount | None = None) -> "Deployer":
        web3 = connect(rpc_url)
        if account is None:
            unlocked = web3.eth.accounts
            if not unlocked:
                raise DeployError("the node unlocks no account: pass --keystore")
        return cls(TxSender(web3, account if account is not None else unlocked[0]))

    @property
    def web3(self) -> Web3:
        return self.sender.web3

    @property
    def address(self) -> str:
        return self.sender.address

    def deploy(self, name: str, *args: Any) -> Contract:
        artifact = load_artifact(name)
        factory = contracts.factory(self.web3, artifact["abi"], artifact["bytecode"])
        receipt = self.sender.send(factory.constructor(*args), what=f"deploy {name}")
        self.gas_used[f"deploy {name}"] = receipt["gasUsed"]
        address = receipt["contractAddress"]
        if address is None:  # a node's receipt for a creation always names it
            raise DeployError(f"deploy {name}: the receipt of tx {receipt['transactionHash'].hex()} names no contract")
        log.info("deployed %s at %s (gas %s)", name, address, receipt["gasUsed"])
        self.deployed[name] = DeployedContract(address=address, abi=artifact["abi"], block=receipt["blockNumber"])
        return contracts.bind(self.web3, address, artifact["abi"])

    def call(self, contract: Contract, fn: str, *args: Any) -> None:
        receipt = self.sender.send(getattr(contract.functions, fn)(*args), what=fn)
        self.gas_used[fn] = receipt["gasUsed"]


def deploy_all(deployer: Deployer, params: DeployParams = DeployParams()) -> Deployment:
    """Deploys and wires the contract set; returns what deployments/<chainId>.json records."""
    params.check()
    ensure_compiled()
    p = params
    treasury = p.treasury or deployer.address
    staking = deployer.deploy("Staking", p.unbonding_delay, p.slash_reward_bps, treasury)
    registry = deployer.deploy("ProviderRegistry", staking.address, p.min_provider_stake)
    escrow = deployer.deploy(
        "JobEscrow", registry.address, treasury, p.challenge_window, p.protocol_fee_bps, p.max_job_duration,
        p.cancel_grace,
    )
    leases = deployer.deploy("LeaseManager", registry.address)
    pog = deployer.deploy(
        "ProofOfGpu", staking.address, registry.address, p.min_verifier_stake,
        p.pog_commit_window, p.root_challenge_period,
    )
    committee = deployer.deploy(
        "DisputeCommittee", staking.address, p.min_verifier_stake, p.quorum_stake, p.vote_window
    )
    challenges = deployer.deploy("ChallengeManager", (
        staking.address, pog.address, escrow.address, committee.address, treasury,
        p.min_bond, p.min_verifier_stake, p.slash_amount, p.false_claim_slash, p.protocol_fee_bps,
        p.response_window, p.fraud_window, p.escalation_window,
    ))
    # Who may do what, granted once and never again: only the challenge contract slashes,
    # freezes escrow and opens committee disputes; only the escrow and the lease contract lock
    # stake that secures open work; only the PoG contract records PoG results; only the registry
    # tells the escrow which providers take jobs.
    deployer.call(staking, "wire", [challenges.address, escrow.address], [escrow.address, leases.address],
                  [escrow.address])
    deployer.call(escrow, "wire", [challenges.address])
    deployer.call(registry, "wire", [pog.address], escrow.address)
    deployer.call(committee, "wire", [challenges.address])
    operator = operator_summary(deployer, treasury)
    if p.with_test_stablecoin:
        deployer.deploy("TestStablecoin")
    return Deployment(
        chain_id=deployer.web3.eth.chain_id,
        deployer=deployer.address,
        contracts=dict(deployer.deployed),
        operator=operator,
    )


# contract -> role -> contracts that must hold it (and nobody else was named in `wire`).
ROLE_HOLDERS: dict[str, dict[str, list[str]]] = {
    "Staking": {"SLASHER_ROLE": ["ChallengeManager", "JobEscrow"], "LOCKER_ROLE": ["JobEscrow", "LeaseManager"]},
    "JobEscrow": {"DISPUTE_ROLE": ["ChallengeManager"]},
    "ProviderRegistry": {"POG_ROLE": ["ProofOfGpu"]},
    "DisputeCommittee": {"OPENER_ROLE": ["ChallengeManager"]},
}


def operator_summary(deployer: "Deployer", treasury: str) -> dict[str, Any]:
    """What the operator keeps, read back from the chain: every contract wired (so no role can
    be granted again), the roles held by exactly the contracts named in ROLE_HOLDERS, none by
    the deployer, and the treasury with the shares of money it receives. Raises DeployError
    when the chain disagrees."""
    web3 = deployer.web3
    bound = {name: contracts.bind(web3, c.address, c.abi) for name, c in deployer.deployed.items()}
    roles: dict[str, dict[str, list[str]]] = {}
    for name, held in ROLE_HOLDERS.items():
        contract = bound[name]
        if not contract.functions.wired().call():
            raise DeployError(f"{name} is not wired: roles could still be granted")
        admin_role = contract.functions.DEFAULT_ADMIN_ROLE().call()
        if contract.functions.hasRole(admin_role, deployer.address).call():
            raise DeployError(f"the deployer holds the admin role of {name}")
        roles[name] = {}
        for role, holders in held.items():
            role_id = getattr(contract.functions, role)().call()
            if contract.functions.hasRole(role_id, deployer.address).call():
                raise DeployError(f"the deployer holds {role} on {name}")
            for holder in holders:
                if not contract.functions.hasRole(role_id, bound[holder].address).call():
                    raise DeployError(f"{holder} lacks {role} on {name}")
            roles[name][role] = [f"{holder} {bound[holder].address}" for holder in holders]
    staking, escrow, challenges = bound["Staking"], bound["JobEscrow"], bound["ChallengeManager"]
    if bound["ProviderRegistry"].functions.jobEscrow().call() != escrow.address:
        raise DeployError("ProviderRegistry does not tell the JobEscrow which providers are active")
    return {
        "keeps": "the treasury address only: no admin role, no role, no setter on any contract",
        "treasury": treasury,
        "treasuryReceives": {
            "JobEscrow.protocolFeeBps": escrow.functions.protocolFeeBps().call(),
            "ChallengeManager.feeBps": challenges.functions.feeBps().call(),
            "Staking.slashShareBps": 10_000 - staking.functions.slashRewardBps().call(),
        },
        "roles": roles,
        "unbondingDelay": staking.functions.unbondingDelay().call(),
    }


def write_deployment(deployment: Deployment, directory: Path = DEPLOYMENTS_DIR) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{deployment.chain_id}.json"
    path.write_text(json.dumps(deployment.to_json(), indent=2))
    return path

