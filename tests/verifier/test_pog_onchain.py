"""Proof-of-GPU rounds with the chain in the loop (anvil with interval mining).

The provider side here is a real prover (or a cheating one) acting with its own account; the
verifier side is verifier.pog_onchain with its own. Failures escalate to on-chain challenges
that end in a slash (timeout or fraud proof judged by the contract) or a settlement.
"""

import itertools

import pytest

from pog_support import ETH, HonestLink, provider_responds_on_chain, register
from protocol.merkle import keccak256
from provider_agent.gpus import cpu_device
from provider_agent.pog_prover import PogProver
from unchained_cli.chain import LocalChain, free_port
from unchained_cli.cheats import SkippingProver
from unchained_cli.deploy import Deployer, deploy_all
from unchained_cli.session import ChainSession
from verifier.chain import VerifierChain
from verifier.pog_onchain import ChallengeState, OnchainPog

N = 128
_accounts = itertools.count(1)


@pytest.fixture(scope="module")
def market():
    with LocalChain(port=free_port(), block_time=0.2) as chain:
        deployment = deploy_all(Deployer.connect(chain.rpc_url))
        s = ChainSession.connect(chain.rpc_url, deployment)
        verifier = s.accounts[9]
        s.send(s.contract("Staking").functions.stake(), verifier, value=5 * ETH)
        yield s, VerifierChain.connect(chain.rpc_url, deployment, unlocked_sender=verifier)


def test_honest_provider_passes_and_the_verdict_is_attested_on_chain(market):
    s, chain = market
    device = cpu_device()
    provider = register(s, next(_accounts), device.uuid_hash)
    link = HonestLink(s, provider, PogProver([device], dtype="fp32"))
    outcome = OnchainPog(chain, link, dtype="fp32", n=N).run_round(provider)
    assert outcome.passed and outcome.challenge_ids == ()
    _round, gpu_class, _tflops, passed, _at = s.contract("ProviderRegistry").functions.pogStatusOf(provider).call()
    assert passed and gpu_class.rstrip(b"\0") == b"CPU"


def test_skipped_work_is_escalated_and_slashed_by_an_onchain_fraud_proof(market):
    s, chain = market
    uuid = keccak256(b"GPU-skipper")
    provider = register(s, next(_accounts), uuid)
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
    provider = register(s, next(_accounts), uuid)
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
    provider = register(s, next(_accounts), device.uuid_hash)
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
