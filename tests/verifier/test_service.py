"""The verifier service on anvil (a block per transaction, and a 1-second block time): it stakes,
schedules rounds, escalates a cheater and, after a restart, finishes the challenge from chain
state alone; one provider's misbehaviour during a tick never stops the work for the others."""

import dataclasses

import pytest

from pog_support import HonestLink, provider_responds_on_chain, register, wait_seed_fixed
from protocol.enums import ChallengeStatus, RoundStatus
from protocol.merkle import keccak256
from provider_agent.gpus import cpu_device
from provider_agent.pog_prover import PogProver
from devtools.cheats import SkippingProver
from devtools.session import ChainSession
from verifier.chain import VerifierChain
from verifier.pog_onchain import ProverUnreachable
from verifier.service import VerifierService
from verifier.settings import Settings


@pytest.fixture(scope="module", params=[None, 1], ids=["instant", "block-time-1s"])
def market(request, chains):
    shared = chains.get(request.param)
    return ChainSession.connect(shared.rpc_url, shared.deployment), shared.rpc_url


def test_service_stakes_runs_rounds_and_finishes_a_fraud_case_after_restart(market):
    s, rpc = market
    device, skipper_uuid = cpu_device("service-honest"), keccak256(b"GPU-skipper")
    honest, skipper = register(s, 1, device.uuid_hash), register(s, 2, skipper_uuid)
    cheat = SkippingProver(skipper_uuid)
    # The skipper goes silent off-chain: no evidence in hand, its fraud shows in its on-chain answer.
    links = {honest: HonestLink(s, honest, PogProver([device], dtype="fp32")),
             skipper: HonestLink(s, skipper, cheat, answers=False)}
    settings = Settings(pog_n=128, pog_dtype="fp32", pog_jitter_s=0, pog_interval_s=3600, metrics_port=None)
    verifier_address = s.accounts[9]

    def service():
        chain = VerifierChain.connect(rpc, s.deployment, unlocked_sender=verifier_address)
        return VerifierService(chain, settings, links.__getitem__)

    first = service()
    assert s.contract("Staking").functions.stakeOf(verifier_address).call() == 0
    assert first.ensure_staked() == settings.stake_wei
    assert first.ensure_staked() == settings.stake_wei  # idempotent: no second stake
    assert {p.address for p in first.providers()} == {honest, skipper}

    first.tick()  # plans both providers (jitter 0: due at once)
    first.tick()  # runs both rounds
    registry = s.contract("ProviderRegistry")
    assert registry.functions.pogStatusOf(honest).call().passed is True
    assert registry.functions.pogStatusOf(skipper).call().passed is False
    [challenge_id] = first.open_challenges()
    assert first.metrics.rounds.labels("failed")._value.get() == 1

    provider_responds_on_chain(s, skipper, cheat, challenge_id)
    stake_before = s.contract("Staking").functions.stakeOf(skipper).call()
    restarted = service()  # a crash here loses nothing: the challenge is found from events
    restarted.tick()
    assert s.contract("Staking").functions.stakeOf(skipper).call() < stake_before
    assert restarted.open_challenges() == []
    assert restarted.metrics.challenges.labels("slashed_fraud")._value.get() == 1


class LeavesMidTick(HonestLink):
    """A provider that deactivates itself after the verifier listed it as active and before its
    round is requested: the request reverts in the middle of the tick."""

    def ready(self):
        self.s.send(self.s.contract("ProviderRegistry").functions.deactivate(), self.provider)


def test_one_providers_misbehaviour_does_not_stop_anothers_follow_up_in_the_same_tick(market):
    s, rpc = market
    silent_uuid, leaver_uuid = keccak256(b"GPU-silent-svc"), keccak256(b"GPU-leaver-svc")
    silent = register(s, 3, silent_uuid)
    links = {silent: HonestLink(s, silent, SkippingProver(silent_uuid), answers=False)}
    settings = Settings(pog_n=128, pog_dtype="fp32", pog_jitter_s=0, pog_interval_s=3600, metrics_port=None)
    chain = VerifierChain.connect(rpc, s.deployment, unlocked_sender=s.accounts[8])
    service = VerifierService(chain, settings, links.__getitem__)
    service.ensure_staked()
    service.tick()  # plans the silent provider
    service.tick()  # its round fails: an on-chain challenge it will not answer
    [challenge_id] = service.open_challenges()

    leaver = register(s, 4, leaver_uuid)
    links[leaver] = LeavesMidTick(s, leaver, SkippingProver(leaver_uuid))
    service.tick()  # plans the leaver; the silent provider's challenge is not due yet
    manager = s.contract("ChallengeManager")
    s.advance(manager.functions.challenge(challenge_id).call().responseDeadline - s.now() + 1)
    stake = s.contract("Staking").functions.stakeOf(silent).call()
    service.tick()  # the leaver's request reverts here; the silent provider is slashed all the same
    assert manager.functions.challenge(challenge_id).call().status == ChallengeStatus.PROVIDER_FAULTED
    assert s.contract("Staking").functions.stakeOf(silent).call() < stake
    assert service.metrics.challenges.labels("slashed_timeout")._value.get() == 1
    assert service.metrics.rounds.labels("retry")._value.get() >= 1  # the leaver's round, retried later


class SilentLink(HonestLink):
    """A provider that takes the verifier's secret and never answers, nor commits on-chain."""

    def commit(self, round_id, secret, sizes):
        raise ProverUnreachable("provider went silent before committing")


def _service(s, rpc, links, account):
    settings = Settings(pog_n=128, pog_dtype="fp32", pog_jitter_s=0, pog_interval_s=3600, metrics_port=None)
    chain = VerifierChain.connect(rpc, s.deployment, unlocked_sender=s.accounts[account])
    service = VerifierService(chain, settings, links.__getitem__)
    service.ensure_staked()
    return service


def test_a_provider_silent_after_a_passed_round_is_recorded_failed_by_the_verifiers_sweep(market):
    """The attack: pass one round, then go silent. The round stayed Requested (no product code
    called markFailed) and the registry kept passed=True. The verifier's tick now ends every
    round it requested once the contract allows it."""
    s, rpc = market
    device = dataclasses.replace(cpu_device(), uuid="CPU-service-silent-later")  # its own device
    provider = register(s, 5, device.uuid_hash)
    links = {provider: HonestLink(s, provider, PogProver([device], dtype="fp32"))}
    service = _service(s, rpc, links, 7)
    registry, pog = s.contract("ProviderRegistry"), s.contract("ProofOfGpu")
    service.tick()  # plans the new provider (no round on record: due at once)
    service.tick()  # its first round passes
    assert registry.functions.pogStatusOf(provider).call().passed is True

    links[provider] = SilentLink(s, provider, None)
    service.scheduler._plans[provider].next_at = 0  # its next round is due now (the interval is 1 h)
    service.tick()  # the round is requested, the seed fixed, and nothing comes
    round_id = pog.functions.roundCount().call()
    wait_seed_fixed(s, round_id)  # the verifier's fixSeed, broadcast before the hand-over
    assert pog.functions.round(round_id).call().status == RoundStatus.REQUESTED  # the commit deadline ahead
    s.advance(pog.functions.round(round_id).call().commitDeadline - s.now() + 1)
    service.tick()
    assert pog.functions.round(round_id).call().status == RoundStatus.FAILED
    status = registry.functions.pogStatusOf(provider).call()
    assert status.passed is False and status.roundId == round_id
    service.tick()  # ended rounds are forgotten: nothing is sent twice
    assert pog.functions.round(round_id).call().status == RoundStatus.FAILED


def test_roots_committed_but_never_sent_to_the_verifier_are_attested_failed_and_challenged(market):
    """The attack: keep the roots from the verifier (the round fails off-chain while still
    Requested), then commit garbage on-chain before the deadline: the round sat Committed
    forever, never attested nor challenged. The verifier's sweep attests it failed and
    challenges every GPU's root; garbage cannot answer and is slashed at the deadline."""
    s, rpc = market
    uuid = keccak256(b"GPU-withholder")
    provider = register(s, 6, uuid)
    links = {provider: SilentLink(s, provider, None)}
    service = _service(s, rpc, links, 8)
    pog, manager = s.contract("ProofOfGpu"), s.contract("ChallengeManager")
    service.tick()  # plans it
    service.tick()  # its round: the secret handed over, nothing comes back
    round_id = pog.functions.roundCount().call()
    wait_seed_fixed(s, round_id)
    s.send(pog.functions.commitRoots(round_id, [keccak256(b"garbage")]), provider)
    service.tick()
    assert pog.functions.round(round_id).call().status == RoundStatus.ATTESTED
    assert s.contract("ProviderRegistry").functions.pogStatusOf(provider).call().passed is False
    [challenge_id] = service.open_challenges()
    c = manager.functions.challenge(challenge_id).call()
    assert c.subject == round_id and c.provider == provider
    s.advance(c.responseDeadline - s.now() + 1)
    stake = s.contract("Staking").functions.stakeOf(provider).call()
    service.tick()
    assert manager.functions.challenge(challenge_id).call().status == ChallengeStatus.PROVIDER_FAULTED
    assert s.contract("Staking").functions.stakeOf(provider).call() < stake
