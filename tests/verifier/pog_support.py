"""Provider-side actors for verifier tests: a real prover answering over an in-process link,
a prover that skips its work, and on-chain answers to escalated challenges."""

import threading

import numpy as np

from protocol.pog import (ChunkAnswer, GpuAnswers, GpuCommitment, RoundAnswers, RoundCommitment,
                          challenge_indices, commit, encode, encode_answers, encode_commitment)
from verifier.pog_onchain import ProverUnreachable

ETH = 10**18


def register(s, account, uuid_hash):
    provider = s.accounts[account]
    s.send(s.contract("Staking").functions.stake(), provider, value=5 * ETH)
    s.send(s.contract("ProviderRegistry").functions.register(
        b"CPU".ljust(32, b"\0"), [uuid_hash], 10**15, 10**12, "test://"), provider)
    return provider


class HonestLink:
    """A provider running the real prover: message first, then its roots on-chain."""

    def __init__(self, s, provider, prover, answers=True):
        self.s, self.provider, self.prover, self.answers = s, provider, prover, answers
        self.committed = threading.Event()

    def ready(self):
        pass

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
