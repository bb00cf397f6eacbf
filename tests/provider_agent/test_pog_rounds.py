"""Proof-of-GPU rounds played on-chain by the agent: roots committed, challenges answered from
kept work, and the answer accepted by the contract (settled: the bond goes to the provider)."""

from __future__ import annotations

from provider_agent.agent import Agent
from tests.provider_agent.conftest import ETH

N = 64
K = 32


def test_agent_commits_pog_roots_and_answers_challenge(settings_for, market):
    agent = Agent.build(settings_for())
    agent.register()
    s = market.session
    pog, challenges = s.contract("ProofOfGpu"), s.contract("ChallengeManager")
    s.send(s.contract("Staking").functions.stake(), market.verifier, value=2 * ETH)
    s.send(pog.functions.requestRound(market.provider, N), market.verifier)
    round_id = pog.functions.roundCount().call()
    s.mine(2)

    commitment = agent.pog.commit(round_id)
    assert '"root"' in commitment
    assert pog.functions.round(round_id).call()[7] == 2  # Committed
    root = pog.functions.rootOf(round_id, 0).call()
    assert root == agent.pog._provers[round_id].work[0].tree.root

    s.send(challenges.functions.challengePog(round_id, 0, K), market.verifier, value=ETH // 10)
    challenge_id = challenges.functions.challengeCount().call()
    s.mine(2)
    # A restarted agent (no work in memory) recomputes the round from its seed and answers.
    fresh = Agent.build(settings_for())
    fresh.pog.answer(round_id, "0x" + "00" * 32)
    assert challenges.functions.challenge(challenge_id).call()[3] == 2  # Answered
    s.advance(challenges.functions.fraudWindow().call() + 1)
    s.send(challenges.functions.settle(challenge_id), market.verifier)
    assert challenges.functions.challenge(challenge_id).call()[3] == 6  # Settled
    assert challenges.functions.owedTo(market.provider).call() > 0
