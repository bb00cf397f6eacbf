"""`unchained demo`: the market on one machine, on a fresh anvil chain.

Parties are anvil's funded accounts: an honest provider, a provider that skips its Proof-of-GPU
work, a renter and a verifier. Everything that moves money happens in the contracts; the
Proof-of-GPU work, the answers and the verdicts are the real prover and checker exchanging the
real (JSON) messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
from rich.console import Console
from rich.table import Table
from web3 import Web3

from protocol.errors import WrongElement
from protocol.merkle import MerkleTree, keccak256, leaf_hash
from protocol.pog import (
    ChunkAnswer,
    GpuAnswers,
    GpuCommitment,
    RoundAnswers,
    RoundCommitment,
    challenge_indices,
    commit,
    encode,
    encode_answers,
    encode_commitment,
)
from provider_agent.gpus import cpu_device
from provider_agent.pog_prover import PogProver
from unchained_cli.chain import LocalChain, free_port
from unchained_cli.deploy import Deployer, deploy_all
from unchained_cli.session import ChainSession
from verifier.pog_checker import PogChecker

ETH = 10**18
ZERO_ADDRESS = "0x" + "00" * 20
POG_N = 256  # small enough for a CPU in a second; a real verifier picks n from the GPU class
K = 32
STAKE = 5 * ETH
BOND = ETH // 10


@dataclass
class Party:
    name: str
    address: str
    start: int = 0
    gas_wei: int = 0


@dataclass
class Demo:
    s: ChainSession
    console: Console
    parties: dict[str, Party] = field(default_factory=dict)

    def send(self, party: str, fn, value: int = 0, what: str = ""):
        receipt = self.s.send(fn, self.parties[party].address, value, what)
        self.parties[party].gas_wei += receipt.gasUsed * receipt.effectiveGasPrice
        return receipt

    def log(self, text: str) -> None:
        self.console.log(text)


class SkippingProver:
    """A provider that commits to a product it never computed (random values) and answers
    challenges from that fake product: its Merkle proofs are valid, its elements are not."""

    def __init__(self, uuid_hash: bytes, seed: int = 7) -> None:
        self.uuid_hash = uuid_hash
        self.rng = np.random.default_rng(seed)

    def commit_round(self, round_seed: bytes, n: int) -> RoundCommitment:
        self.fake = self.rng.integers(-(2**20), 2**20, size=(n, n), dtype=np.int32)
        self.tree = commit(self.fake)
        self.n, self.round_seed = n, round_seed
        return RoundCommitment(round_seed, (GpuCommitment(0, self.uuid_hash, n, self.tree.root),))

    def answer_round(self, randomness: bytes, k: int) -> RoundAnswers:
        indices = challenge_indices(randomness, self.tree.root, self.tree.size, k)
        flat = self.fake.reshape(-1, 64)
        answers = tuple(ChunkAnswer(i, encode(flat[i]), tuple(self.tree.proof(i))) for i in indices)
        return RoundAnswers(self.round_seed, (GpuAnswers(0, answers),))


def _pog_round(d: Demo, provider: str, prover, uuid_hash: bytes, gpu_name: str) -> None:
    s = d.s
    pog, challenges, registry = s.contract("ProofOfGpu"), s.contract("ChallengeManager"), s.contract("ProviderRegistry")
    address = d.parties[provider].address
    d.send("verifier", pog.functions.requestRound(address, POG_N))
    round_id = pog.functions.roundCount().call()
    s.mine(2)  # the seed is the hash of the block after the request
    d.send("verifier", pog.functions.fixSeed(round_id))
    seed = pog.functions.round(round_id).call()[-1]

    checker = PogChecker(k=K, dtype="fp32", answer_window_s=120)
    checker.open_round(seed, [PogChecker.claim(uuid_hash, gpu_name, n=POG_N)])
    commitment = prover.commit_round(seed, POG_N)
    checker.receive_commitment(encode_commitment(commitment))
    d.send(provider, pog.functions.commitRoots(round_id, [g.root for g in commitment.gpus]))
    d.log(f"PoG round {round_id}: {provider} committed root 0x{commitment.gpus[0].root.hex()[:16]}… at n={POG_N}")

    d.send("verifier", challenges.functions.challengePog(round_id, 0, K), value=BOND)
    challenge_id = challenges.functions.challengeCount().call()
    s.mine(2)  # challenge indices come from the hash of the block after the challenge
    d.send("verifier", challenges.functions.fixRandomness(challenge_id))
    randomness = challenges.functions.challenge(challenge_id).call()[12]
    checker.reveal(randomness)
    answers = prover.answer_round(randomness, K)
    gpu = answers.gpus[0]
    d.send(provider, challenges.functions.respond(
        challenge_id, [a.data for a in gpu.answers], [list(a.siblings) for a in gpu.answers]))
    round_verdict = checker.judge(encode_answers(answers))
    verdict = round_verdict.gpus[0]
    measured_ms = int(round_verdict.seed_to_root_s * 1000)

    if verdict.passed:
        d.log(f"  verifier: all {K} chunks exact; class {verdict.gpu_class}, {verdict.tflops * 1000:.1f} GFLOPS")
        d.send("verifier", pog.functions.attest(
            round_id, measured_ms, _bytes32(verdict.gpu_class or ""), int(verdict.tflops * 1000), True))
        s.advance(challenges.functions.fraudWindow().call() + 1)
        d.send("verifier", challenges.functions.settle(challenge_id))
        d.log(f"  challenge {challenge_id} settled: bond (minus fee) paid to {provider}")
        return

    error = verdict.error
    d.log(f"  verifier: [red]{verdict.failure}[/red]")
    if isinstance(error, WrongElement):
        answer = next(a for a in gpu.answers if a.index == error.index)
        d.send("verifier", challenges.functions.proveFraud(
            challenge_id, answer.index, answer.data, list(answer.siblings), error.offset))
        d.log(f"  fraud proven on-chain (element recomputed by the contract): {provider} slashed")
    d.send("verifier", pog.functions.attest(round_id, measured_ms, _bytes32(""), 0, False))
    _round_id, _class, _tflops, passed, _at = registry.functions.pogStatusOf(address).call()
    d.log(f"  registry records {provider}'s PoG round {round_id} as passed={passed}")


def _bytes32(text: str) -> bytes:
    return text.encode()[:32].ljust(32, b"\0")


def _job(d: Demo, uuid_hash: bytes) -> None:
    """A batch job: the provider runs a small model over 16 items and commits their digests."""
    s = d.s
    escrow = s.contract("JobEscrow")
    provider = d.parties["honest"].address
    rng = np.random.default_rng(1)
    weights = rng.standard_normal((8, 4)).astype(np.float32)
    inputs = rng.standard_normal((16, 8)).astype(np.float32)
    spec = {"model": "0x" + keccak256(weights.tobytes()).hex(), "inputs": "0x" + keccak256(inputs.tobytes()).hex(),
            "batch": 16, "tolerance": 0.0}
    spec_hash = keccak256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode())
    price = ETH // 20
    d.send("renter", escrow.functions.createJob(provider, spec_hash, price, s.now() + 3600), value=price)
    job_id = escrow.functions.jobCount().call()
    d.send("honest", escrow.functions.acceptJob(job_id))
    outputs = np.tanh(inputs @ weights)
    digests = [keccak256(row.tobytes()) for row in outputs]
    tree = MerkleTree([leaf_hash(x) for x in digests])
    d.send("honest", escrow.functions.commitResult(job_id, tree.root, len(digests), keccak256(outputs.tobytes())))
    d.log(f"job {job_id}: {len(digests)} items, output root 0x{tree.root.hex()[:16]}… committed; challenge window open")
    s.advance(escrow.functions.challengeWindow().call() + 1)
    d.send("renter", escrow.functions.finalize(job_id))
    d.log(f"job {job_id}: finalized after the window: provider paid price minus {escrow.functions.protocolFeeBps().call() / 100:.0f}% fee")


def _lease(d: Demo) -> None:
    s = d.s
    leases = s.contract("LeaseManager")
    provider = d.parties["honest"].address
    cost = leases.functions.leaseCost(provider, 1, 3600).call()
    d.send("renter", leases.functions.startLease(provider, 1, 3600), value=cost)
    lease_id = leases.functions.leaseCount().call()
    s.advance(1200)
    d.send("renter", leases.functions.endLease(lease_id))
    d.log(f"lease {lease_id}: 1 GPU for 1 h paid {Web3.from_wei(cost, 'ether')} ETH, ended after 20 min: unused time refunded")


def _withdraw_all(d: Demo) -> None:
    s = d.s
    for party in d.parties:
        address = d.parties[party].address
        for name, fn in (("JobEscrow", lambda c: c.functions.withdraw(ZERO_ADDRESS)),
                         ("LeaseManager", lambda c: c.functions.withdraw()),
                         ("ChallengeManager", lambda c: c.functions.withdraw()),
                         ("Staking", lambda c: c.functions.withdraw())):
            contract = s.contract(name)
            owed = (contract.functions.owedTo(ZERO_ADDRESS, address) if name == "JobEscrow"
                    else contract.functions.owedTo(address)).call()
            if owed:
                d.send(party, fn(contract))


def run(console: Console | None = None) -> dict[str, int]:
    """Runs the scenario; returns each party's balance change in wei (for tests)."""
    console = console or Console()
    with LocalChain(port=free_port()) as chain:
        console.log(f"anvil at {chain.rpc_url}")
        deployment = deploy_all(Deployer.connect(chain.rpc_url))
        s = ChainSession.connect(chain.rpc_url, deployment)
        console.log(f"deployed {len(deployment.contracts)} contracts on chain {deployment.chain_id}")
        d = Demo(s, console)
        # The deployer (account 0) is the treasury: it collects protocol fees and slash shares.
        for i, name in enumerate(("treasury", "honest", "cheater", "renter", "verifier")):
            d.parties[name] = Party(name, s.accounts[i], s.balance(s.accounts[i]))

        staking, registry = s.contract("Staking"), s.contract("ProviderRegistry")
        device = cpu_device()
        cheater_uuid = keccak256(b"GPU-cheater-0")
        for party in ("honest", "cheater", "verifier"):
            d.send(party, staking.functions.stake(), value=STAKE)
        d.send("honest", registry.functions.register(_bytes32("CPU"), [device.uuid_hash], 10**16, 10**12, "demo://honest"))
        d.send("cheater", registry.functions.register(_bytes32("CPU"), [cheater_uuid], 10**16, 10**12, "demo://cheater"))
        d.log("providers and verifier staked 5 ETH each; providers registered one device each")

        _pog_round(d, "honest", PogProver([device], dtype="fp32"), device.uuid_hash, "CPU")
        _pog_round(d, "cheater", SkippingProver(cheater_uuid), cheater_uuid, "CPU")
        _job(d, device.uuid_hash)
        _lease(d)
        _withdraw_all(d)

        table = Table(title="balances (ETH): before, after, change, gas paid")
        for column in ("party", "before", "after", "change", "gas", "staked"):
            table.add_column(column, justify="right" if column != "party" else "left")
        changes = {}
        for party in d.parties.values():
            after = s.balance(party.address)
            changes[party.name] = after - party.start
            table.add_row(party.name, _eth(party.start), _eth(after), _eth(after - party.start),
                          _eth(party.gas_wei), _eth(staking.functions.stakeOf(party.address).call()))
        console.print(table)
        contracts = Table(title="contract balances (ETH)")
        contracts.add_column("contract")
        contracts.add_column("holds", justify="right")
        held = 0
        for name in ("Staking", "JobEscrow", "LeaseManager", "ChallengeManager"):
            balance = s.balance(deployment.contract(name).address)
            held += balance
            contracts.add_row(name, _eth(balance))
        console.print(contracts)
        # Every wei is accounted for: what the parties lost beyond gas sits in the contracts
        # (stakes still bonded), and nothing else holds ETH.
        unaccounted = sum(changes.values()) + sum(p.gas_wei for p in d.parties.values()) + held
        console.print(f"every wei accounted for: {'yes' if unaccounted == 0 else f'NO ({unaccounted} wei)'}")
        if unaccounted:
            raise RuntimeError(f"{unaccounted} wei unaccounted for")
        return changes


def _eth(wei: int) -> str:
    return f"{wei / ETH:,.6f}"
