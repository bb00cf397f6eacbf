"""Proof-of-GPU rounds with the chain in the loop, on anvil mining a block per transaction and
on anvil with a 1-second block time (every module test runs on both).

The provider side here is a real prover (or a cheating one) acting with its own account; the
verifier side is verifier.pog_onchain with its own. Failures escalate to on-chain challenges
that end in a slash (timeout or fraud proof judged by the contract) or a settlement, and the
verifier reports what the contract decided.
"""

import itertools
import os

import pytest

from pog_support import ETH, HonestLink, provider_responds_on_chain, register
from protocol.enums import ChallengeStatus
from protocol.merkle import keccak256
from provider_agent.gpus import cpu_device
from provider_agent.pog_prover import PogProver
from provider_agent.pog_residency import ResidencyProver
from protocol.pog.residency import FillParams
from devtools.cheats import SkippingProver
from devtools.session import ChainSession
from verifier.chain import VerifierChain
from verifier.pog_onchain import ChallengeState, OnchainPog, ProverUnreachable

N = 128
_accounts = itertools.count(1)


@pytest.fixture(scope="module", params=[None, 1], ids=["instant", "block-time-1s"])
def market(request, chains):
    global _accounts
    _accounts = itertools.count(1)  # each chain has its own provider accounts 1..18 (19 is the verifier)
    shared = chains.get(request.param, accounts=20)
    s = ChainSession.connect(shared.rpc_url, shared.deployment)
    verifier = s.accounts[19]
    s.send(s.contract("Staking").functions.stake(), verifier, value=5 * ETH)
    return s, VerifierChain.connect(shared.rpc_url, shared.deployment, unlocked_sender=verifier)


def test_honest_provider_passes_and_the_verdict_is_attested_on_chain(market):
    s, chain = market
    device = cpu_device(os.urandom(8).hex())  # its own device: the registry refuses one device twice
    provider = register(s, next(_accounts), device.uuid_hash)
    link = HonestLink(s, provider, PogProver([device], dtype="fp32"))
    outcome = OnchainPog(chain, link, dtype="fp32", n=N).run_round(provider)
    assert outcome.passed and outcome.challenge_ids == ()
    pog_status = s.contract("ProviderRegistry").functions.pogStatusOf(provider).call()
    assert pog_status.passed and pog_status.gpuClass.rstrip(b"\0") == b"CPU"


def test_a_wrong_element_revealed_off_chain_is_proven_on_chain_at_once(market):
    """The attack: the skipper's off-chain answers hold a wrong element behind a valid inclusion
    proof. The verifier used to escalate with a fresh on-chain draw and drop that evidence; a
    draw that misses the skipped chunks (the provider answers them cleanly) settled in the
    provider's favour. The chunk in hand is now proven on-chain right after the challenge."""
    s, chain = market
    uuid = keccak256(b"GPU-skipper")
    provider = register(s, next(_accounts), uuid)
    prover = SkippingProver(uuid)
    verifier = OnchainPog(chain, HonestLink(s, provider, prover), dtype="fp32", n=N)
    stake_before = s.contract("Staking").functions.stakeOf(provider).call()
    outcome = verifier.run_round(provider)
    assert not outcome.passed and len(outcome.challenge_ids) == 1
    assert "expected" in outcome.verdict.gpus[0].failure  # a wrong element, named
    challenge_id = outcome.challenge_ids[0]
    manager = s.contract("ChallengeManager")
    assert manager.functions.challenge(challenge_id).call().status == ChallengeStatus.PROVIDER_FAULTED
    assert s.contract("Staking").functions.stakeOf(provider).call() < stake_before
    # A fresh verifier instance (as after a restart) finds it over, and nobody is slashed twice.
    restarted = OnchainPog(chain, HonestLink(s, provider, prover), dtype="fp32", n=N)
    assert restarted.follow_up(challenge_id) is ChallengeState.CLOSED


def test_wrong_chunks_revealed_on_chain_are_proven_by_the_follow_up(market):
    """No off-chain evidence (the provider went silent off-chain): the on-chain answer's wrong
    chunks are found and proven by follow_up, from chain state alone."""
    s, chain = market
    uuid = keccak256(b"GPU-skipper-onchain")
    provider = register(s, next(_accounts), uuid)
    prover = SkippingProver(uuid)
    verifier = OnchainPog(chain, HonestLink(s, provider, prover, answers=False), dtype="fp32", n=N)
    challenge_id = verifier.run_round(provider).challenge_ids[0]
    assert verifier.follow_up(challenge_id) is ChallengeState.WAITING
    stake_before = s.contract("Staking").functions.stakeOf(provider).call()
    provider_responds_on_chain(s, provider, prover, challenge_id)
    restarted = OnchainPog(chain, HonestLink(s, provider, prover), dtype="fp32", n=N)
    assert restarted.follow_up(challenge_id) is ChallengeState.SLASHED_FRAUD
    assert s.contract("Staking").functions.stakeOf(provider).call() < stake_before
    assert restarted.follow_up(challenge_id) is ChallengeState.CLOSED


def test_fraud_found_after_the_fraud_window_is_settled_not_retried_tick_after_tick(market):
    """A verifier that looks too late (offline through the fraud window) must not send a proof
    the contract can only refuse on every tick: the answer stands and the challenge settles."""
    s, chain = market
    uuid = keccak256(b"GPU-late-look")
    provider = register(s, next(_accounts), uuid)
    prover = SkippingProver(uuid)
    # Silent off-chain, so the verifier holds no evidence: only the on-chain answer shows the fraud.
    verifier = OnchainPog(chain, HonestLink(s, provider, prover, answers=False), dtype="fp32", n=N)
    challenge_id = verifier.run_round(provider).challenge_ids[0]
    provider_responds_on_chain(s, provider, prover, challenge_id)
    s.advance(s.contract("ChallengeManager").functions.fraudWindow().call() + 1)
    assert verifier.follow_up(challenge_id) is ChallengeState.SETTLED


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
    s.advance(s.contract("ChallengeManager").functions.challenge(challenge_id).call().responseDeadline - s.now() + 1)
    stake_before = s.contract("Staking").functions.stakeOf(provider).call()
    assert verifier.follow_up(challenge_id) is ChallengeState.SLASHED_TIMEOUT
    assert s.contract("Staking").functions.stakeOf(provider).call() < stake_before


def test_an_honest_answer_to_an_onchain_challenge_settles_in_the_providers_favour(market):
    s, chain = market
    device = cpu_device(os.urandom(8).hex())  # its own device: the registry refuses one device twice
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


def _anvil_mine(s, blocks):
    s.web3.provider.make_request("anvil_mine", [hex(blocks)])


def test_the_clock_starts_before_the_seed_is_knowable(market, monkeypatch):
    """Head start: a provider watching the chain must not learn its seed before the verifier's
    clock runs. After the request the chain holds only the secret's hash; the secret (hence the
    seed) first leaves the verifier in its fixSeed broadcast and its hand-over to the provider,
    and both come after the clock started."""
    import time

    import verifier.pog_onchain as onchain

    s, chain = market
    device = cpu_device(os.urandom(8).hex())  # its own device: the registry refuses one device twice
    provider = register(s, next(_accounts), device.uuid_hash)
    times: dict[str, float] = {}
    pog = s.contract("ProofOfGpu")

    class Watching(HonestLink):
        def commit(self, round_id, secret, sizes):
            times.setdefault("handed over", time.monotonic())
            return super().commit(round_id, secret, sizes)

    class ClockSpy(onchain.PogChecker):
        def open_round(self, round_seed, claims):
            times["clock started"] = time.monotonic()
            # What a provider could read from the chain at this moment: no seed, only a hash.
            latest = pog.functions.roundCount().call()
            times["seed on-chain when the clock started"] = pog.functions.round(latest).call().seed
            super().open_round(round_seed, claims)

    real_broadcast = chain.broadcast

    def broadcast(fn, value=0):
        if fn.fn_name == "fixSeed":  # every send broadcasts: only the reveal of the secret counts here
            times.setdefault("secret broadcast", time.monotonic())
        return real_broadcast(fn, value)

    monkeypatch.setattr(onchain, "PogChecker", ClockSpy)
    monkeypatch.setattr(chain, "broadcast", broadcast)
    assert OnchainPog(chain, Watching(s, provider, PogProver([device], dtype="fp32")), dtype="fp32", n=N).run_round(provider).passed
    assert times["seed on-chain when the clock started"] == bytes(32)
    assert times["clock started"] <= times["secret broadcast"] <= times["handed over"]


def test_a_silent_provider_is_slashed_even_after_256_blocks_and_the_verifier_says_what_the_contract_decided(market):
    s, chain = market
    uuid = keccak256(b"GPU-silent-long")
    provider = register(s, next(_accounts), uuid)
    verifier = OnchainPog(chain, HonestLink(s, provider, SkippingProver(uuid), answers=False), dtype="fp32", n=N)
    challenge_id = verifier.run_round(provider).challenge_ids[0]
    manager = s.contract("ChallengeManager")
    assert manager.functions.challenge(challenge_id).call().randomness != bytes(32)  # fixed at once by the verifier
    _anvil_mine(s, 300)
    s.advance(manager.functions.challenge(challenge_id).call().responseDeadline - s.now() + 1)
    stake_before = s.contract("Staking").functions.stakeOf(provider).call()
    assert verifier.follow_up(challenge_id) is ChallengeState.SLASHED_TIMEOUT
    assert manager.functions.challenge(challenge_id).call().status == ChallengeStatus.PROVIDER_FAULTED
    assert s.contract("Staking").functions.stakeOf(provider).call() < stake_before


def test_follow_up_reports_a_dismissal_not_a_slash(market):
    """The verifier used to report "slashed" after any timeout claim. Two challenges of one root,
    both unanswered: the contract slashes once and dismisses the second, and says so."""
    s, chain = market
    uuid = keccak256(b"GPU-silent-twice")
    provider = register(s, next(_accounts), uuid)
    verifier = OnchainPog(chain, HonestLink(s, provider, SkippingProver(uuid), answers=False), dtype="fp32", n=N)
    outcome = verifier.run_round(provider)
    [first] = outcome.challenge_ids
    manager = s.contract("ChallengeManager")
    chain.send(manager.functions.challengePog(outcome.round_id, 0, 32), value=manager.functions.minBond().call())
    second = manager.functions.challengeCount().call()
    s.advance(manager.functions.challenge(second).call().responseDeadline - s.now() + 1)
    assert verifier.follow_up(first) is ChallengeState.SLASHED_TIMEOUT
    assert verifier.follow_up(second) is ChallengeState.DISMISSED
    assert manager.functions.challenge(second).call().status == ChallengeStatus.DISMISSED
    assert verifier.follow_up(second) is ChallengeState.CLOSED


FILL = FillParams(lanes=16, steps=16, iterations=1)


def two_devices():
    return [cpu_device(os.urandom(8).hex()) for _ in range(2)]


def test_a_two_device_round_probes_both_fills_and_counts_them(market):
    s, chain = market
    box = two_devices()
    provider = register(s, next(_accounts), *(d.uuid_hash for d in box))
    link = HonestLink(s, provider, PogProver(box, dtype="fp32"), residency=ResidencyProver(box))
    outcome = OnchainPog(chain, link, dtype="fp32", n=N, fill=FILL).run_round(provider)
    assert outcome.passed and outcome.challenge_ids == ()
    assert [(g.resident, g.proven_devices) for g in outcome.verdict.gpus] == [(True, 2)] * 2
    assert outcome.verdict.probe_s is not None


def test_a_prover_that_cannot_answer_the_probe_counts_no_device_and_is_not_challenged(market):
    s, chain = market
    box = two_devices()
    provider = register(s, next(_accounts), *(d.uuid_hash for d in box))

    class Silent(HonestLink):
        def probe(self, round_id, randomness, q):
            raise ProverUnreachable("no probe answers")

    link = Silent(s, provider, PogProver(box, dtype="fp32"), residency=ResidencyProver(box))
    outcome = OnchainPog(chain, link, dtype="fp32", n=N, fill=FILL).run_round(provider)
    assert outcome.passed and outcome.challenge_ids == ()  # the matmul work was right
    assert all(g.resident is False for g in outcome.verdict.gpus)


def test_a_wrong_fill_block_fails_the_round_without_an_onchain_challenge(market):
    # The contract knows no fills: a bad fill is the verifier's verdict (attested failed), and
    # the matmul roots, which were right, are not challenged.
    s, chain = market
    box = two_devices()
    provider = register(s, next(_accounts), *(d.uuid_hash for d in box))

    class Tampered(HonestLink):
        def probe(self, round_id, randomness, q):
            raw = super().probe(round_id, randomness, q)
            first = raw.index(b'"block":"0x') + len(b'"block":"0x')
            flipped = b"1" if raw[first:first + 1] != b"1" else b"2"
            return raw[:first] + flipped + raw[first + 1:]

    link = Tampered(s, provider, PogProver(box, dtype="fp32"), residency=ResidencyProver(box))
    outcome = OnchainPog(chain, link, dtype="fp32", n=N, fill=FILL).run_round(provider)
    assert not outcome.passed and outcome.challenge_ids == ()
    assert outcome.verdict.gpus[0].fill_failed and outcome.verdict.gpus[0].failure.startswith("residency")
    pog_status = s.contract("ProviderRegistry").functions.pogStatusOf(provider).call()
    assert not pog_status.passed
