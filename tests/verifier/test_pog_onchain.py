"""Proof-of-GPU rounds with the chain in the loop (anvil with interval mining).

The provider side here is a real prover (or a cheating one) acting with its own account; the
verifier side is verifier.pog_onchain with its own. Failures escalate to on-chain challenges
that end in a slash (timeout or fraud proof judged by the contract) or a settlement.
"""

import threading

import numpy as np
import pytest

from protocol.merkle import keccak256
from protocol.pog import (ChunkAnswer, GpuAnswers, GpuCommitment, RoundAnswers, RoundCommitment,
                          challenge_indices, commit, encode, encode_answers, encode_commitment)
from provider_agent.gpus import cpu_device
from provider_agent.pog_prover import PogProver
from unchained_cli.chain import LocalChain, free_port
from unchained_cli.deploy import Deployer, deploy_all
from unchained_cli.session import ChainSession
from verifier.chain import VerifierChain
from verifier.pog_onchain import ChallengeState, OnchainPog, ProverUnreachable

ETH = 10**18
N = 128


@pytest.fixture(scope="module")
def market():
    with LocalChain(port=free_port(), block_time=0.2) as chain:
        deployment = deploy_all(Deployer.connect(chain.rpc_url))
        s = ChainSession.connect(chain.rpc_url, deployment)
        verifier = s.accounts[9]
        s.send(s.contract("Staking").functions.stake(), verifier, value=5 * ETH)
        yield s, VerifierChain.connect(chain.rpc_url, deployment, unlocked_sender=verifier)


_next_account = iter(range(1, 9))


def register(s, uuid_hash):
    provider = s.accounts[next(_next_account)]
    s.send(s.contract("Staking").functions.stake(), provider, value=5 * ETH)
    s.send(s.contract("ProviderRegistry").functions.register(
        b"CPU".ljust(32, b"\0"), [uuid_hash], 10**15, 10**12, "test://"), provider)
    return provider


class HonestLink:
    """A provider running the real prover: message first, then its roots on-chain."""

    def __init__(self, s, provider, prover, answers=True):
        self.s, self.provider, self.prover, self.answers = s, provider, prover, answers
        self.committed = threading.Event()

    def commit(self, round_id, seed, sizes):
        commitment = self.prover.commit_round(seed, sizes[0])
        self._post_roots(round_id, commitment)
        return encode_commitment(commitment)

    def _post_roots(self, round_id, commitment):
        def post():
            self.s.send(self.s.contract("ProofOfGpu").functions.commitRoots(
                round_id, [g.root for g in commitment.gpus]), self.provider)
            self.committed.set()
        threading.Thread(target=post, daemon=True).start()

    def answer(self, round_id, randomness, k):
        if not self.answers:
            raise ProverUnreachable("provider went silent after committing")
        return encode_answers(self.prover.answer_round(randomness, k))


class SkippingProver:
    """Commits to random values instead of C; its proofs are valid, its elements are not."""

    def __init__(self, uuid_hash):
        self.uuid_hash = uuid_hash

    def commit_round(self, seed, n):
        self.fake = np.random.default_rng(3).integers(-(2**20), 2**20, size=(n, n), dtype=np.int32)
        self.tree, self.seed = commit(self.fake), seed
        return RoundCommitment(seed, (GpuCommitment(0, self.uuid_hash, n, self.tree.root),))

    def chunks(self, indices):
        flat = self.fake.reshape(-1, 64)
        return [ChunkAnswer(i, encode(flat[i]), tuple(self.tree.proof(i))) for i in indices]

    def answer_round(self, randomness, k):
        indices = challenge_indices(randomness, self.tree.root, self.tree.size, k)
        return RoundAnswers(self.seed, (GpuAnswers(0, tuple(self.chunks(indices))),))


def provider_responds_on_chain(s, provider, prover, challenge_id):
    challenges = s.contract("ChallengeManager")
    s.mine(2)
    indices = challenges.functions.challengeIndices(challenge_id).call()
    answers = prover.chunks(indices) if isinstance(prover, SkippingProver) else prover.work[0].answer(indices)
    s.send(challenges.functions.respond(challenge_id, [a.data for a in answers],
                                        [list(a.siblings) for a in answers]), provider)


def test_honest_provider_passes_and_the_verdict_is_attested_on_chain(market):
    s, chain = market
    device = cpu_device()
    provider = register(s, device.uuid_hash)
    link = HonestLink(s, provider, PogProver([device], dtype="fp32"))
    outcome = OnchainPog(chain, link, dtype="fp32", n=N).run_round(provider)
    assert outcome.passed and outcome.challenge_ids == ()
    _round, gpu_class, _tflops, passed, _at = s.contract("ProviderRegistry").functions.pogStatusOf(provider).call()
    assert passed and gpu_class.rstrip(b"\0") == b"CPU"


def test_skipped_work_is_escalated_and_slashed_by_an_onchain_fraud_proof(market):
    s, chain = market
    uuid = keccak256(b"GPU-skipper")
    provider = register(s, uuid)
    prover = SkippingProver(uuid)
    verifier = OnchainPog(chain, HonestLink(s, provider, prover), dtype="fp32", n=N)
    outcome = verifier.run_round(provider)
    assert not outcome.passed and len(outcome.challenge_ids) == 1
    assert "expected" in outcome.verdict.gpus[0].failure  # a wrong element, named
    stake_before = s.contract("Staking").functions.stakeOf(provider).call()
    challenge_id = outcome.challenge_ids[0]
    assert verifier.follow_up(challenge_id) is ChallengeState.WAITING
    provider_responds_on_chain(s, provider, prover, challenge_id)
    # A fresh verifier instance (as after a restart) finishes the job from chain state alone.
    restarted = OnchainPog(chain, HonestLink(s, provider, prover), dtype="fp32", n=N)
    assert restarted.follow_up(challenge_id) is ChallengeState.SLASHED_FRAUD
    assert s.contract("Staking").functions.stakeOf(provider).call() < stake_before
    assert restarted.follow_up(challenge_id) is ChallengeState.CLOSED  # nobody is slashed twice


def test_a_provider_silent_after_committing_is_slashed_after_the_response_deadline(market):
    s, chain = market
    uuid = keccak256(b"GPU-silent")
    provider = register(s, uuid)
    prover = SkippingProver(uuid)
    verifier = OnchainPog(chain, HonestLink(s, provider, prover, answers=False), dtype="fp32", n=N)
    outcome = verifier.run_round(provider)
    assert not outcome.passed and "silent" in outcome.detail
    challenge_id = outcome.challenge_ids[0]
    assert verifier.follow_up(challenge_id) is ChallengeState.WAITING
    s.advance(s.contract("ChallengeManager").functions.challenge(challenge_id).call()[6] - s.now() + 1)
    stake_before = s.contract("Staking").functions.stakeOf(provider).call()
    assert verifier.follow_up(challenge_id) is ChallengeState.SLASHED_TIMEOUT
    assert s.contract("Staking").functions.stakeOf(provider).call() < stake_before


def test_an_honest_answer_to_an_onchain_challenge_settles_in_the_providers_favour(market):
    s, chain = market
    device = cpu_device()
    # The registry refuses a UUID hash twice per provider, not across providers: reuse is fine here.
    provider = register(s, device.uuid_hash)
    prover = PogProver([device], dtype="fp32")
    link = HonestLink(s, provider, prover, answers=False)  # off-chain answer lost: escalated
    verifier = OnchainPog(chain, link, dtype="fp32", n=N)
    outcome = verifier.run_round(provider)
    challenge_id = outcome.challenge_ids[0]
    provider_responds_on_chain(s, provider, prover, challenge_id)
    assert verifier.follow_up(challenge_id) is ChallengeState.WAITING  # fraud window open
    s.advance(s.contract("ChallengeManager").functions.fraudWindow().call() + 1)
    assert verifier.follow_up(challenge_id) is ChallengeState.SETTLED
    assert s.contract("ChallengeManager").functions.owedTo(provider).call() > 0
