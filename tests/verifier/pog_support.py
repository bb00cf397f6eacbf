"""Provider-side actors for verifier tests: a prover (real, or unchained_cli.cheats'
SkippingProver) answering over an in-process link, and on-chain answers to escalated challenges."""

import threading

from protocol.pog import encode_answers, encode_commitment
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


def provider_responds_on_chain(s, provider, prover, challenge_id):
    challenges = s.contract("ChallengeManager")
    s.mine(2)
    indices = challenges.functions.challengeIndices(challenge_id).call()
    answers = prover.work[0].answer(indices)
    s.send(challenges.functions.respond(challenge_id, [a.data for a in answers],
                                        [list(a.siblings) for a in answers]), provider)
