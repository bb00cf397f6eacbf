"""Gas used by each step that settles money or proofs, measured on a fresh anvil deployment.

Uniform trees (every leaf the same random chunk) stand in for big commitments: a proof of any
index is then the same list of real sibling hashes, so a depth-20 commitment costs 20 hashes to
build while the contract does exactly the work it does for a real one (same calldata size, same
hashing). A chunk of random bytes is wrong with overwhelming probability, which lets the same
setup measure a fraud proof: one on-chain element recomputation plus its inclusion check.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from web3 import Web3

from protocol.escrow_job import EscrowJob
from protocol.merkle import leaf_hash, node_hash
from client.contracts import emitted
from client.ports import free_port
from unchained_cli.chain import LocalChain
from unchained_cli.deploy import Deployer, deploy_all
from devtools.session import ChainSession

CHUNK_BYTES = 256
PAID = "finalize and withdraw (the provider, finalizeJobsAndWithdraw)"
ETH = 10**18


@dataclass(frozen=True)
class GasRow:
    step: str
    gas: int
    goal: int | None = None


def uniform_tree(leaf: bytes, depth: int) -> tuple[bytes, list[bytes]]:
    """Root and sibling path of a tree of 2**depth copies of `leaf`."""
    level = leaf_hash(leaf)
    path = []
    for _ in range(depth):
        path.append(level)
        level = node_hash(level, level)
    return level, path


def _pog_challenge(s: ChainSession, provider: str, verifier: str, n: int, chunk: bytes) -> tuple[int, int, list[bytes], dict]:
    """Runs a PoG round at `n` committed to a uniform tree and a k=32 challenge of it."""
    pog, challenges = s.contract("ProofOfGpu"), s.contract("ChallengeManager")
    depth = (n * n // 64).bit_length() - 1
    root, path = uniform_tree(chunk, depth)
    secret = Web3.keccak(text=f"bench-secret-{n}")
    request = s.send(pog.functions.requestRound(provider, n, Web3.keccak(secret)), verifier)
    round_id = pog.functions.roundCount().call()
    fix_seed = s.send(pog.functions.fixSeed(round_id, secret), verifier)  # the reveal: the verifier times from here
    commit = s.send(pog.functions.commitRoots(round_id, [root]), provider)
    s.send(challenges.functions.challengePog(round_id, 0, 32), verifier, value=ETH // 10)
    challenge_id = challenges.functions.challengeCount().call()
    respond = s.send(challenges.functions.respond(challenge_id, [chunk] * 32, [path] * 32), provider)
    return challenge_id, depth, path, {"request": request.gasUsed, "fix_seed": fix_seed.gasUsed, "commit": commit.gasUsed,
                                   "respond": respond.gasUsed}


def _timeout_claim(s: ChainSession, provider: str, verifier: str) -> int:
    """Gas of a timeout claim on a fresh round's challenge left unanswered."""
    pog, challenges = s.contract("ProofOfGpu"), s.contract("ChallengeManager")
    secret = Web3.keccak(text="bench-secret-timeout")
    s.send(pog.functions.requestRound(provider, 64, Web3.keccak(secret)), verifier)
    round_id = pog.functions.roundCount().call()
    s.send(pog.functions.fixSeed(round_id, secret), verifier)
    s.send(pog.functions.commitRoots(round_id, [Web3.keccak(text="root")]), provider)
    s.send(challenges.functions.challengePog(round_id, 0, 32), verifier, value=ETH // 10)
    challenge_id = challenges.functions.challengeCount().call()
    s.advance(challenges.functions.responseWindow().call() + 1)
    return s.send(challenges.functions.claimTimeout(challenge_id), verifier).gasUsed


BATCH = 10


def _job_rows(s: ChainSession, escrow, provider: str, renters: list[str], phase: str) -> list[GasRow]:
    """An ETH job's lifecycle alone (the commit accepts it), then BATCH jobs of alternating
    renters committed in one commitResults and finalized in one finalizeJobsAndWithdraw, per job:
    as the provider agent settles, its pay reaches its wallet in the finalizing transaction (the
    lifecycle ends with the provider paid); the fee stays with the treasury. Every call
    after create passes the Job rebuilt from JobCreated (and ResultCommitted), as clients do.
    `phase` names the run in the rows: run first on a fresh deployment it is "cold" (first writes
    of the provider's and treasury's balances and bookkeeping); run again it is "steady" (the same
    provider's next jobs, the market's normal case)."""
    price, spec, root, digest = ETH // 100, Web3.keccak(text="spec"), Web3.keccak(text="root"), Web3.keccak(text="digest")
    window = escrow.functions.challengeWindow().call()

    def create(renter: str) -> tuple[EscrowJob, int]:
        receipt = s.send(escrow.functions.createJob(provider, spec, price, s.now() + 3600), renter, value=price)
        created = emitted(escrow, "JobCreated", receipt)[0]["args"]
        return EscrowJob.from_created(created), receipt.gasUsed

    job, create_gas = create(renters[0])
    commit = s.send(escrow.functions.commitResult(job.as_tuple(), root, 128, digest), provider)
    job = job.committed(root, 128, digest)
    s.advance(window + 1)
    paid = s.send(escrow.functions.finalizeJobsAndWithdraw([job.as_tuple()]), provider)
    steps = [("create", create_gas), ("commit (accepts)", commit.gasUsed), (PAID, paid.gasUsed)]
    rows = [GasRow(f"job ({phase}): {name}", gas) for name, gas in steps]
    rows.append(GasRow(f"job ({phase}): total (create..paid)", sum(gas for _, gas in steps), 180_000))

    created = [create(renters[i % len(renters)]) for i in range(BATCH)]
    jobs = [job for job, _ in created]
    commit = s.send(escrow.functions.commitResults([j.as_tuple() for j in jobs], [root] * BATCH, [128] * BATCH,
                                                   [digest] * BATCH), provider)
    jobs = [j.committed(root, 128, digest) for j in jobs]
    s.advance(window + 1)
    paid = s.send(escrow.functions.finalizeJobsAndWithdraw([j.as_tuple() for j in jobs]), provider)
    batch = [("create", sum(gas for _, gas in created)), ("commitResults", commit.gasUsed), (PAID, paid.gasUsed)]
    rows += [GasRow(f"{BATCH} jobs batched ({phase}): {name}, per job", gas // BATCH) for name, gas in batch]
    rows.append(GasRow(f"{BATCH} jobs batched ({phase}): total per job (create..paid)",
                       sum(gas for _, gas in batch) // BATCH, 90_000))
    return rows


def measure(chain_port: int | None = None) -> list[GasRow]:
    rows: list[GasRow] = []
    with LocalChain(port=chain_port or free_port()) as chain:
        deployer = Deployer.connect(chain.rpc_url)
        deployment = deploy_all(deployer)
        s = ChainSession.connect(chain.rpc_url, deployment)
        provider, renter, verifier = s.accounts[1], s.accounts[2], s.accounts[3]
        staking, registry, escrow = s.contract("Staking"), s.contract("ProviderRegistry"), s.contract("JobEscrow")
        for account in (provider, verifier):
            s.send(staking.functions.stake(), account, value=5 * ETH)
        uuid = Web3.keccak(text="GPU-bench-0")
        registered = s.send(registry.functions.register(b"H100-SXM".ljust(32, b"\0"), [uuid], 10**15, 10**12,
                                                        "ipfs://bench"), provider)
        rows.append(GasRow("provider: register (1 GPU; the registry tells the escrow it is active)", registered.gasUsed))

        # First on the fresh deployment (cold), then the same provider's next jobs (steady).
        rows += _job_rows(s, escrow, provider, [renter, verifier], "cold: fresh deployment")
        rows += _job_rows(s, escrow, provider, [renter, verifier], "steady: same provider again")
        staker = s.accounts[4]
        first = s.send(staking.functions.stake(), staker, value=ETH)
        again = s.send(staking.functions.stake(), staker, value=ETH)
        unbond = s.send(staking.functions.requestUnbond(ETH), staker)
        s.advance(staking.functions.unbondingDelay().call() + 1)
        out = s.send(staking.functions.withdrawUnbonded(), staker)
        rows += [GasRow("stake: first stake", first.gasUsed), GasRow("stake: top up", again.gasUsed),
                 GasRow("stake: request unbond", unbond.gasUsed), GasRow("stake: withdraw unbonded", out.gasUsed)]

        rng = random.Random(20261122)
        chunk = rng.randbytes(CHUNK_BYTES)
        _, depth, _, gas = _pog_challenge(s, provider, verifier, 8192, chunk)
        rows.append(GasRow("PoG: request a round (verifier, 1 GPU, secret hash committed)", gas["request"]))
        rows.append(GasRow("PoG: reveal the secret, fixing the round seed (verifier)", gas["fix_seed"]))
        rows.append(GasRow("PoG: commit roots (1 GPU)", gas["commit"], 60_000))
        rows.append(GasRow(f"PoG: answer a k=32 challenge at depth {depth}", gas["respond"], 1_500_000))

        challenges = s.contract("ChallengeManager")
        challenge_id, _, path, _ = _pog_challenge(s, provider, verifier, 4096, chunk)
        fraud = s.send(challenges.functions.proveFraud(challenge_id, 0, chunk, path, 0), verifier)
        rows.append(GasRow("PoG: fraud proof at n=4096 (element recomputation + depth-18 inclusion + slash)", fraud.gasUsed))
        rows.append(GasRow("PoG: claim a timeout (provider slashed, bond returned)", _timeout_claim(s, provider, verifier)))
        harness = deployer.deploy("ProofLibrariesHarness")
        element = s.send(harness.functions.elementGas(Web3.keccak(text="seed"), 4096, 4095, 17), verifier)
        rows.append(GasRow("PoG: one element recomputed on-chain at n=4096 (whole tx)", element.gasUsed, 1_000_000))
    return rows
