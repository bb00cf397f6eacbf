"""Proof-of-GPU rounds played on-chain by the agent: roots committed, challenges answered from
kept work, and the answer accepted by the contract (settled: the bond goes to the provider)."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import provider_agent.pog_service as pog_service
from protocol.enums import ChallengeStatus, RoundStatus
from protocol.pog import pog_secret_hash
from provider_agent.agent import Agent
from provider_agent.pog_service import PogRoundError
from tests.support.provider_market import ETH

N = 64
K = 32


def test_agent_commits_pog_roots_and_answers_challenge(settings_for, market):
    agent = Agent.build(settings_for())
    agent.register()
    s = market.session
    pog, challenges = s.contract("ProofOfGpu"), s.contract("ChallengeManager")
    s.send(s.contract("Staking").functions.stake(), market.verifier, value=2 * ETH)
    round_id, secret = _request(s, pog, market)

    # The secret arrives with the verifier's fixSeed in flight: the agent computes at once, from
    # the secret and the request block's hash, without waiting for any block.
    commitment = agent.pog.compute(round_id, "0x" + secret.hex())
    assert '"root"' in commitment
    assert pog.functions.round(round_id).call().status == RoundStatus.REQUESTED  # the message comes first...
    s.send(pog.functions.fixSeed(round_id, secret), market.verifier)
    agent.pog.commit_onchain(round_id)
    assert pog.functions.round(round_id).call().status == RoundStatus.COMMITTED  # ...then the same roots on-chain
    assert agent.pog.commit_onchain(round_id) == "already committed"
    root = pog.functions.rootOf(round_id, 0).call()
    assert root == agent.pog._provers[round_id].work[0].tree.root

    s.send(challenges.functions.challengePog(round_id, 0, K), market.verifier, value=ETH // 10)
    challenge_id = challenges.functions.challengeCount().call()
    # A restarted agent (no work in memory) recomputes the round from its seed, finds the open
    # challenge on-chain by itself and answers it.
    fresh = Agent.build(settings_for())
    assert len(fresh.answer_open_challenges()) == 1
    assert fresh.answer_open_challenges() == []
    assert challenges.functions.challenge(challenge_id).call().status == ChallengeStatus.ANSWERED
    s.advance(challenges.functions.fraudWindow().call() + 1)
    s.send(challenges.functions.settle(challenge_id), market.verifier)
    assert challenges.functions.challenge(challenge_id).call().status == ChallengeStatus.SETTLED
    assert challenges.functions.owedTo(market.provider).call() > 0


def test_agent_answers_the_verifiers_secret_off_chain_with_checkable_chunks(settings_for, market):
    from protocol.pog import challenge_indices, check_chunks, decode_answers
    from protocol.pog.workload import gpu_seed

    agent = Agent.build(settings_for())
    agent.register()
    s = market.session
    pog = s.contract("ProofOfGpu")
    s.send(s.contract("Staking").functions.stake(), market.verifier, value=2 * ETH)
    round_id, round_secret = _request(s, pog, market)
    agent.pog.compute(round_id, round_secret.hex())
    s.send(pog.functions.fixSeed(round_id, round_secret), market.verifier)
    agent.pog.commit_onchain(round_id)
    secret = bytes(range(32))
    answers = decode_answers(agent.pog.answer(round_id, "0x" + secret.hex(), K).encode(), 1, K)
    seed = pog.functions.round(round_id).call().seed
    root = pog.functions.rootOf(round_id, 0).call()
    got = answers.gpus[0].answers
    assert [a.index for a in got] == challenge_indices(secret, root, N * N // 64, K)
    uuid = s.contract("ProviderRegistry").functions.uuidHashOf(market.provider, 0).call()
    check_chunks(gpu_seed(seed, 0, uuid), N, root, [(a.index, a.data, a.siblings) for a in got])


def test_agent_builds_the_verifiers_fills_and_answers_the_probe(settings_for, market):
    from protocol.pog import decode_fills, decode_probes
    from protocol.pog.residency import FillParams, check_probes, probe_indices
    from protocol.pog.workload import gpu_seed

    agent = Agent.build(settings_for())
    agent.register()
    s = market.session
    pog = s.contract("ProofOfGpu")
    s.send(s.contract("Staking").functions.stake(), market.verifier, value=2 * ETH)
    round_id, round_secret = _request(s, pog, market)
    agent.pog.compute(round_id, round_secret.hex())
    with pytest.raises(PogRoundError, match="no fills held"):
        agent.pog.probe(round_id, "0x" + bytes(32).hex(), 32)
    for shapes, reason in (([[12, 16, 1]], "bad fill shape"), ([[16, 16, 1]] * 2, "2 fill shapes"),
                           ([["x", 16, 1]], "bad fill shape")):
        with pytest.raises(PogRoundError, match=reason):
            agent.pog.fill(round_id, shapes)
    fills = decode_fills(agent.pog.fill(round_id, [[16, 16, 1]]).encode(), 1)
    params = FillParams(16, 16, 1)
    randomness = bytes(range(32))
    with pytest.raises(PogRoundError, match="randomness"):
        agent.pog.probe(round_id, "0x12", 32)
    probes = decode_probes(agent.pog.probe(round_id, "0x" + randomness.hex(), 32).encode(), 1, 32)
    seed = agent.pog._provers[round_id].round_seed
    uuid = s.contract("ProviderRegistry").functions.uuidHashOf(market.provider, 0).call()
    root = fills.gpus[0].root
    check_probes(gpu_seed(seed, 0, uuid), params, root, probe_indices(randomness, root, params),
                 probes.gpus[0].probes)
    with pytest.raises(PogRoundError, match="no fills held"):  # freed after the one probe
        agent.pog.probe(round_id, "0x" + randomness.hex(), 32)


def _request(s, pog, market) -> tuple[int, bytes]:
    secret = os.urandom(32)
    s.send(pog.functions.requestRound(market.provider, N, pog_secret_hash(secret)), market.verifier)
    return pog.functions.roundCount().call(), secret


def test_agent_handed_a_wrong_secret_computes_from_the_seed_fixed_on_chain(settings_for, market):
    """The attack: a verifier fixes the right secret on-chain but hands the agent a wrong one.
    The agent used to refuse the round, never commit, and be marked failed at the deadline; it
    now ignores the hand-over and commits roots for the seed the chain fixed."""
    agent = Agent.build(settings_for())
    agent.register()
    s = market.session
    pog = s.contract("ProofOfGpu")
    s.send(s.contract("Staking").functions.stake(), market.verifier, value=2 * ETH)
    round_id, secret = _request(s, pog, market)
    with ThreadPoolExecutor(1) as pool:
        computing = pool.submit(agent.pog.compute, round_id, "0x" + os.urandom(32).hex())
        s.send(pog.functions.fixSeed(round_id, secret), market.verifier)
        assert '"root"' in computing.result(timeout=60)
    agent.pog.commit_onchain(round_id)
    r = pog.functions.round(round_id).call()
    assert r.status == RoundStatus.COMMITTED
    assert agent.pog._provers[round_id].round_seed == r.seed


class _JumpingClock:
    """The agent's wall clock, moved forward together with the chain's (evm_increaseTime), so
    that "125 s pass" takes no real time: the agent sees both clocks agree."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def test_agent_waits_for_a_late_reveal_as_long_as_the_contract_accepts_it(settings_for, market, monkeypatch):
    """The attack: the verifier reveals its secret 125 s after the request, inside the contract's
    600 s seed window. The agent used to give up after a timer of its own (120 s), never commit,
    and anyone's markFailed then recorded an honest provider as failed."""
    clock = _JumpingClock()
    monkeypatch.setattr(pog_service, "time", clock)
    agent = Agent.build(settings_for())
    agent.register()
    s = market.session
    pog = s.contract("ProofOfGpu")
    s.send(s.contract("Staking").functions.stake(), market.verifier, value=2 * ETH)
    round_id, secret = _request(s, pog, market)
    assert pog.functions.commitWindow().call() > 125
    agent.pog.compute(round_id, secret.hex())
    with ThreadPoolExecutor(1) as pool:
        committing = pool.submit(agent.pog.commit_onchain, round_id)
        time.sleep(2 * pog_service.POLL_S)  # the agent is polling for the seed
        clock.offset += 125
        s.advance(125)
        time.sleep(2 * pog_service.POLL_S)
        s.send(pog.functions.fixSeed(round_id, secret), market.verifier)
        committing.result(timeout=60)
    assert pog.functions.round(round_id).call().status == RoundStatus.COMMITTED


def test_agent_commit_waits_for_the_seed_until_the_contracts_deadline(settings_for, market):
    agent = Agent.build(settings_for())
    agent.register()
    s = market.session
    pog = s.contract("ProofOfGpu")
    s.send(s.contract("Staking").functions.stake(), market.verifier, value=2 * ETH)
    round_id, secret = _request(s, pog, market)
    agent.pog.compute(round_id, secret.hex())
    s.advance(pog.functions.commitWindow().call() + 1)
    with pytest.raises(PogRoundError, match="not fixed on-chain by its deadline"):
        agent.pog.commit_onchain(round_id)  # the verifier never revealed: nothing to commit to


def test_agent_commits_a_round_whose_secret_never_reached_it_from_the_chains_seed(settings_for, market):
    """The attack: the verifier fixes the seed on-chain but never hands the secret over (or
    the task is lost). The agent used to do nothing and be marked failed at the deadline; its
    heartbeat now commits, from the seed on-chain, once half the commit window has passed."""
    agent = Agent.build(settings_for())
    agent.register()
    s = market.session
    pog = s.contract("ProofOfGpu")
    s.send(s.contract("Staking").functions.stake(), market.verifier, value=2 * ETH)
    round_id, secret = _request(s, pog, market)
    s.send(pog.functions.fixSeed(round_id, secret), market.verifier)
    assert agent.commit_forgotten_rounds() == []  # the verifier's hand-over may still come
    r = pog.functions.round(round_id).call()
    s.advance(r.commitDeadline - s.now() - pog.functions.commitWindow().call() // 2 + 1)
    assert agent.commit_forgotten_rounds() == [round_id]
    assert pog.functions.round(round_id).call().status == RoundStatus.COMMITTED
    assert agent.pog._provers[round_id].round_seed == r.seed
    assert agent.commit_forgotten_rounds() == []  # ended rounds leave the watch
