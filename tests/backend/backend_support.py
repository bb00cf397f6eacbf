"""Helpers for the backend tests: settings, private PostgreSQL schemas, and market activity on
anvil from its unlocked accounts (so the indexer sees every kind of event)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from web3 import Web3

from client.escrow_jobs import read_job, read_job_view
from client.ports import free_port
from backend.settings import Settings
from protocol.enums import JobStatus
from protocol.merkle import MerkleTree, keccak256, leaf_hash
from devtools.session import ChainSession
from tests.support.served import serving

ETH = 10**18
PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def make_settings(chain: Any, tmp_path: Path, database_url: str = "", **overrides: Any) -> Settings:
    local, _, path = chain
    # public_url: TestClient's base URL (the SIWE domain clients expect); live servers override it.
    values: dict[str, Any] = dict(data_dir=tmp_path, database_url=database_url, rpc_url=local.rpc_url,
                                  deployment_file=path, confirmations=0, dispatch=False, run_indexer=False,
                                  public_url="http://testserver")
    values.update(overrides)
    return Settings(**values)



@contextmanager
def live_backend(chain: Any, tmp_path: Path, **overrides: Any) -> Iterator[str]:
    """A live backend over `chain` (uvicorn in a thread, indexer following the chain); yields its URL."""
    port = free_port()
    with serving(make_settings(chain, tmp_path, run_indexer=True, index_poll_seconds=0.1,
                               public_url=f"http://127.0.0.1:{port}", **overrides), port) as url:
        yield url


def chain_args(chain: Any) -> list[str]:
    """The console's options that name the chain."""
    return ["--rpc", chain[0].rpc_url, "--deployment", str(chain[2])]

@contextmanager
def private_schema() -> Iterator[str]:
    """A private schema in the shared PostgreSQL `test` database, dropped afterwards."""
    schema = f"backend_{secrets.token_hex(6)}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{PG_ADMIN_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def bytes32(text: str) -> bytes:
    return text.encode()[:32].ljust(32, b"\0")


@dataclass
class Parties:
    deployer: str
    provider: str
    provider2: str
    renter: str
    verifier: str


def parties(s: ChainSession) -> Parties:
    a = s.accounts
    return Parties(a[0], a[1], a[2], a[3], a[4])


def stake_and_register(s: ChainSession, p: Parties) -> None:
    staking, registry = s.contract("Staking"), s.contract("ProviderRegistry")
    for who in (p.provider, p.provider2, p.verifier):
        s.send(staking.functions.stake(), who, value=5 * ETH)
    s.send(registry.functions.register(bytes32("H100-SXM"), [keccak256(b"gpu-a0")], 10**16, 10**12,
                                       "meta://a"), p.provider)
    s.send(registry.functions.register(bytes32("RTX-4090"), [keccak256(b"gpu-b0"), keccak256(b"gpu-b1")],
                                       5 * 10**15, 2 * 10**12, "meta://b"), p.provider2)
    s.send(registry.functions.setPrices(9 * 10**15, 10**12), p.provider)


def pog_round(s: ChainSession, p: Parties, provider: str, passed: bool, gpu_class: str, tflops_milli: int) -> int:
    pog = s.contract("ProofOfGpu")
    secret = keccak256(b"secret-%d" % pog.functions.roundCount().call())
    s.send(pog.functions.requestRound(provider, 64, keccak256(secret)), p.verifier)
    round_id = pog.functions.roundCount().call()
    s.send(pog.functions.fixSeed(round_id, secret), p.verifier)
    count = s.contract("ProviderRegistry").functions.gpuCountOf(provider).call()
    s.send(pog.functions.commitRoots(round_id, [keccak256(b"root%d" % g) for g in range(count)]), provider)
    s.send(pog.functions.attest(round_id, 1234, bytes32(gpu_class), tflops_milli, passed), p.verifier)
    return round_id



def drained_provider(s: ChainSession, p: Parties) -> str:
    """A third provider staked at exactly the minimum, verified, then slashed for a PoG challenge it
    never answered: below the minimum stake, so inactive on-chain (no registry event says so)."""
    staking, registry = s.contract("Staking"), s.contract("ProviderRegistry")
    challenges = s.contract("ChallengeManager")
    who = s.accounts[8]
    s.send(staking.functions.stake(), who, value=registry.functions.minProviderStake().call())
    s.send(registry.functions.register(bytes32("A100-SXM"), [keccak256(b"gpu-c0")], 10**15, 10**12, "meta://c"), who)
    round_id = pog_round(s, p, who, True, "A100-SXM", 300_000)
    s.send(challenges.functions.challengePog(round_id, 0, 32), p.verifier, value=ETH // 10)
    challenge_id = challenges.functions.challengeCount().call()
    s.advance(challenges.functions.responseWindow().call() + 1)
    s.send(challenges.functions.claimTimeout(challenge_id), p.verifier)
    return who

def funded_job(s: ChainSession, renter: str, provider: str, spec_hash: bytes, price: int) -> int:
    escrow = s.contract("JobEscrow")
    s.send(escrow.functions.createJob(provider, spec_hash, price, s.now() + 3600), renter, value=price)
    return escrow.functions.jobCount().call()


def commit_outputs(s: ChainSession, provider: str, job_id: int, outputs: list[bytes]) -> MerkleTree:
    escrow = s.contract("JobEscrow")
    tree = MerkleTree([leaf_hash(keccak256(o)) for o in outputs])
    s.send(escrow.functions.commitResult(read_job(escrow, job_id).as_tuple(), tree.root, len(outputs), keccak256(b"".join(outputs))), provider)
    return tree


def full_market(s: ChainSession) -> Parties:
    """Providers, PoG rounds (pass and fail), a finalized job, a cancelled job, a lease, a PoG
    challenge, withdrawals: one or more of every projected event kind."""
    p = parties(s)
    stake_and_register(s, p)
    pog_round(s, p, p.provider, True, "H100-SXM", 700_000)
    pog_round(s, p, p.provider2, False, "", 0)
    escrow = s.contract("JobEscrow")
    job_id = funded_job(s, p.renter, p.provider, keccak256(b"spec-1"), ETH // 10)
    commit_outputs(s, p.provider, job_id, [b"out-%d" % i for i in range(5)])
    s.advance(escrow.functions.challengeWindow().call() + 1)
    s.send(escrow.functions.finalize(read_job(escrow, job_id).as_tuple()), p.renter)
    cancelled = funded_job(s, p.renter, p.provider2, keccak256(b"spec-2"), ETH // 20)
    s.send(escrow.functions.requestCancel(read_job(escrow, cancelled).as_tuple()), p.renter)
    s.advance(escrow.functions.cancelGrace().call())  # no commit in the grace: the cancel refunds
    s.send(escrow.functions.cancel(read_job(escrow, cancelled).as_tuple()), p.renter)
    leases = s.contract("LeaseManager")
    cost = leases.functions.leaseCost(p.provider2, 1, 3600).call()
    s.send(leases.functions.startLease(p.provider2, 1, 3600), p.renter, value=cost)
    s.advance(600)
    s.send(leases.functions.endLease(leases.functions.leaseCount().call()), p.renter)
    challenges = s.contract("ChallengeManager")
    round_id = pog_round(s, p, p.provider, True, "H100-SXM", 710_000)
    s.send(challenges.functions.challengePog(round_id, 0, 32), p.verifier, value=ETH // 10)
    s.mine(2)
    for who in (p.provider, p.renter):
        if escrow.functions.owedTo(Web3.to_checksum_address("0x" + "00" * 20), who).call():
            s.send(escrow.functions.withdraw("0x" + "00" * 20), who)
    s.send(s.contract("Staking").functions.requestUnbond(ETH), p.provider2)
    disputed_job(s, p)
    return p


def reverify(s: ChainSession, p: Parties) -> int:
    """A new passed PoG round for the market's provider, which full_market leaves slashed (a lost
    dispute) after its last one: not available, quoted nor matched before this round
    (protocol.availability). It measures as its last passed round did."""
    return pog_round(s, p, p.provider, True, "H100-SXM", 710_000)


def disputed_job(s: ChainSession, p: Parties) -> int:
    """A job challenge answered by the provider, escalated, and voted provider-at-fault by two
    staked voters: the committee's events, a slash and a refund of a frozen escrow."""
    escrow, challenges = s.contract("JobEscrow"), s.contract("ChallengeManager")
    committee, staking = s.contract("DisputeCommittee"), s.contract("Staking")
    job_id = funded_job(s, p.renter, p.provider, keccak256(b"spec-disputed"), ETH // 50)
    outputs = [b"disputed-%d" % i for i in range(4)]
    tree = commit_outputs(s, p.provider, job_id, outputs)
    s.send(challenges.functions.challengeJob(read_job(escrow, job_id).as_tuple(), 2), p.verifier, value=ETH // 10)
    challenge_id = challenges.functions.challengeCount().call()
    s.mine(2)
    indices = challenges.functions.challengeIndices(challenge_id).call()
    s.send(challenges.functions.respond(challenge_id, [keccak256(outputs[i]) for i in indices],
                                        [list(tree.proof(i)) for i in indices]), p.provider)
    s.send(challenges.functions.escalate(challenge_id), p.verifier)
    dispute_id = challenges.functions.challenge(challenge_id).call().disputeId
    for voter in s.accounts[5:7]:
        s.send(staking.functions.stake(), voter, value=2 * ETH)
        s.send(committee.functions.vote(dispute_id, True), voter)
    s.advance(committee.functions.voteWindow().call() + 1)
    s.send(committee.functions.resolve(dispute_id), p.renter)
    assert read_job_view(escrow, job_id).status == JobStatus.REFUNDED
    return job_id


def anvil_key(index: int) -> Any:
    """anvil's funded account `index` as a LocalAccount (its well-known development key)."""
    from tests.support.accounts import dev_account

    return dev_account(index)


class Tagged:
    """Tiny real models (y = 2x + tag) whose bytes differ by `tag`: the hub accepts only files
    that load, and content addressing needs distinct files for distinct entries."""

    @staticmethod
    def module(tag: float) -> Any:
        import torch

        class TaggedNet(torch.nn.Module):
            def __init__(self, tag: float) -> None:
                super().__init__()
                self.tag = tag

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x * 2.0 + self.tag

        return TaggedNet(tag)

    @classmethod
    def torchscript(cls, tag: float) -> bytes:
        import io

        import torch

        buffer = io.BytesIO()
        torch.jit.save(torch.jit.script(cls.module(tag)), buffer)
        return buffer.getvalue()

    @classmethod
    def onnx(cls, tag: float) -> bytes:
        import io

        import torch

        buffer = io.BytesIO()
        torch.onnx.export(cls.module(tag), (torch.zeros(2, 8),), buffer, dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        return buffer.getvalue()
