"""A whole Proof-of-GPU round between the real verifier and a real provider worker process,
over Celery on Redis (each with the broker user an operator grants it), on anvil mining a block
per transaction (nothing waits for a block that no transaction makes): the verifier's seed
secret handed over with its fixSeed in flight, the roots sent at once and then committed
on-chain, the verifier's challenge secret answered off-chain, the verdict attested on-chain.
Then the off-chain answer is withheld: the verifier escalates on-chain and the agent answers
the challenge by itself from chain state."""

from __future__ import annotations

from client.broker import grant
from protocol.tasks import provider_queue
from provider_agent.agent import Agent
from tests.support.accounts import dev_account
from tests.support.broker import signed_sender
from tests.support.provider_market import ETH
from tests.support.worker import Worker
from verifier.chain import VerifierChain
from verifier.links import CeleryProverLink
from verifier.pog_onchain import ChallengeState, OnchainPog, ProverUnreachable

N = 128


class LostAnswers(CeleryProverLink):
    """The off-chain answer never arrives (as if the provider went quiet after committing)."""

    def answer(self, round_id, randomness, k):
        raise ProverUnreachable("answer lost")


def test_round_over_celery_passes_and_an_escalation_is_answered_on_chain(settings_for, market, redis_url):
    # Each with its own broker user, as an operator grants them: the users' command allowlists
    # (protocol.broker) hold everything a real worker and a real verifier do.
    settings = settings_for(broker_url=grant(redis_url, "provider", market.provider), gpu_model="CPU")
    agent = Agent.build(settings)
    agent.register()
    s = market.session
    s.send(s.contract("Staking").functions.stake(), market.verifier, value=2 * ETH)
    verifier = VerifierChain.connect(market.chain.rpc_url, s.deployment, unlocked_sender=market.verifier)
    client = signed_sender(grant(redis_url, "verifier", market.verifier), market, 4)  # it requests the rounds
    assert dev_account(4).address == market.verifier
    worker = Worker(settings, provider_queue(market.provider))
    try:
        link = CeleryProverLink(client, market.provider, commit_timeout_s=120, answer_timeout_s=60)
        outcome = OnchainPog(verifier, link, dtype="fp32", n=N).run_round(market.provider)
        assert outcome.passed, outcome.verdict
        assert s.contract("ProviderRegistry").functions.pogStatusOf(market.provider).call().passed is True

        lossy = OnchainPog(verifier, LostAnswers(client, market.provider, commit_timeout_s=120), dtype="fp32", n=N)
        escalated = lossy.run_round(market.provider)
        [challenge_id] = escalated.challenge_ids
        assert lossy.follow_up(challenge_id) is ChallengeState.WAITING
        # The agent's heartbeat: it finds the challenge on-chain and answers it.
        assert len(Agent.build(settings).answer_open_challenges()) == 1
        s.advance(s.contract("ChallengeManager").functions.fraudWindow().call() + 1)
        assert lossy.follow_up(challenge_id) is ChallengeState.SETTLED
    finally:
        worker.stop()
