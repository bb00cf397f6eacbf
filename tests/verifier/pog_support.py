"""Provider-side actors for verifier tests: a prover (real, or devtools.cheats'
SkippingProver) answering over an in-process link, and on-chain answers to escalated challenges.

They act as the provider agent does: the seed comes from the verifier's secret and the request
block's hash, the roots go on-chain once the verifier's fixSeed is mined, and a challenge's
indices come from the randomness stored when it was opened.
"""

import threading
import time

from protocol.pog import (
    challenge_indices,
    encode_answers,
    encode_commitment,
    encode_fills,
    encode_probes,
    pog_round_seed,
    pog_secret_hash,
)
from verifier.pog_onchain import ProverUnreachable

ETH = 10**18
WAIT_S = 60.0


def register(s, account, *uuid_hashes):
    provider = s.accounts[account]
    s.send(s.contract("Staking").functions.stake(), provider, value=5 * ETH)
    s.send(s.contract("ProviderRegistry").functions.register(
        b"CPU".ljust(32, b"\0"), list(uuid_hashes), 10**15, 10**12, "test://"), provider)
    return provider


def seed_from_secret(s, round_id, secret):
    """The provider's derivation: checks the secret against the round's secretHash."""
    r = s.contract("ProofOfGpu").functions.round(round_id).call()
    assert pog_secret_hash(secret) == r.secretHash, "secret does not match the round's secretHash"
    block_hash = bytes(s.web3.eth.get_block(r.requestBlock)["hash"])
    return pog_round_seed(block_hash, secret, round_id, bytes.fromhex(r.provider[2:]))


def wait_seed_fixed(s, round_id, timeout_s=WAIT_S):
    pog = s.contract("ProofOfGpu")
    deadline = time.monotonic() + timeout_s
    while pog.functions.round(round_id).call().seed == bytes(32):
        assert time.monotonic() < deadline, f"round {round_id}: seed not fixed within {timeout_s}s"
        time.sleep(0.05)


class HonestLink:
    """A provider running the real prover: message first, then its roots on-chain."""

    def __init__(self, s, provider, prover, answers=True, residency=None):
        self.s, self.provider, self.prover, self.answers = s, provider, prover, answers
        self.residency = residency
        self.committed = threading.Event()

    def ready(self):
        pass

    def commit(self, round_id, secret, sizes):
        commitment = self.prover.commit_round(seed_from_secret(self.s, round_id, secret), sizes[0])
        self._post_roots(round_id, commitment)
        return encode_commitment(commitment)

    def _post_roots(self, round_id, commitment):
        def post():
            wait_seed_fixed(self.s, round_id)
            self.s.send(self.s.contract("ProofOfGpu").functions.commitRoots(
                round_id, [g.root for g in commitment.gpus]), self.provider)
            self.committed.set()
        threading.Thread(target=post, daemon=True).start()

    def answer(self, round_id, randomness, k):
        if not self.answers:
            raise ProverUnreachable("provider went silent after committing")
        return encode_answers(self.prover.answer_round(randomness, k))

    def fill(self, round_id, shapes):
        """The residency fills, built by `self.residency` (a ResidencyProver over the same
        devices) from the seed the matmul was computed for."""
        params = dict(enumerate(shapes))
        return encode_fills(self.residency.commit_fills(self.prover.round_seed, params))

    def probe(self, round_id, randomness, q):
        return encode_probes(self.residency.answer_probes(randomness, q))


def challenge_indices_now(s, challenge_id):
    """Indices as the agent derives them: from R, stored when the challenge was opened."""
    c = s.contract("ChallengeManager").functions.challenge(challenge_id).call()
    return challenge_indices(c.randomness, c.root, c.leafCount, c.k)


def provider_responds_on_chain(s, provider, prover, challenge_id):
    challenges = s.contract("ChallengeManager")
    answers = prover.work[0].answer(challenge_indices_now(s, challenge_id))
    s.send(challenges.functions.respond(challenge_id, [a.data for a in answers],
                                        [list(a.siblings) for a in answers]), provider)
