"""The verifier as a long-running service: stake, run Proof-of-GPU rounds on schedule, and carry
every on-chain challenge it opened to its end.

Everything it needs to resume is on the chain: providers come from registry events, its own open
challenges from ChallengeManager events filtered by challenger, followed with a cursor in its
state file (verifier.watch), so a restarted verifier finishes what a crashed one started.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge
from web3 import Web3

from client.backend_http import BackendUnavailable
from client.contracts import ViewCall, read_batched
from client.errors import NodeUnavailable, TransactionReverted
from client.reachability import Reachability
from client.watched_ids import WatchedIds
from protocol.enums import ChallengeStatus
from verifier.backend_client import Decision, VerifierBackend
from verifier.cc_attestation import NvAttester
from verifier.chain import VerifierChain
from verifier.committee import CommitteeMember
from verifier.job_audit import JobAuditor
from verifier.pog_onchain import ChallengeState, LinkDown, OnchainPog, ProverLink, SeedNotFixed
from verifier.pog_scheduler import Outcome, PogScheduler, ProviderState, TransientRoundError
from verifier.settings import Settings
from verifier.signed_results import SignedResultSlasher
from verifier.watch import POG_CHALLENGE, POG_ROUND, PROVIDER, watch_chain

logger = logging.getLogger(__name__)


@dataclass
class VerifierMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.rounds = Counter("unchained_verifier_pog_rounds", "PoG rounds by outcome", ["outcome"],
                              registry=self.registry)
        self.challenges = Counter("unchained_verifier_challenges", "On-chain challenges by end state",
                                  ["state"], registry=self.registry)
        self.providers = Gauge("unchained_verifier_providers", "Providers known from the registry",
                               registry=self.registry)
        self.jobs = Counter("unchained_verifier_job_events", "Job audits, job challenges and committee votes",
                            ["event"], registry=self.registry)


@dataclass
class VerifierService:
    chain: VerifierChain
    settings: Settings
    link_for: Callable[[str], ProverLink]
    metrics: VerifierMetrics = field(default_factory=VerifierMetrics)
    auditor: JobAuditor | None = None  # job audits and our job challenges (needs the backend)
    committee: CommitteeMember | None = None  # votes in job disputes opened by others
    slasher: SignedResultSlasher | None = None  # slashes with providers' signed results (needs the backend)
    watch: WatchedIds | None = None  # default: kept in settings.state_db

    def __post_init__(self) -> None:
        if self.watch is None:
            self.watch = watch_chain(self.chain, self.settings.state_db)
        self.staking = self.chain.contract("Staking")
        self.registry = self.chain.contract("ProviderRegistry")
        self.leases = self.chain.contract("LeaseManager")
        self.challenges = self.chain.contract("ChallengeManager")
        self.pog = self.chain.contract("ProofOfGpu")
        # Three reads a provider, every tick: in JSON-RPC batches, not one round trip each.
        self._provider_views = (ViewCall(self.registry, "isActive"), ViewCall(self.leases, "isLeased"),
                                ViewCall(self.registry, "pogStatusOf"))
        for part in (self.auditor, self.committee):
            if part is not None:
                part.record = lambda event: self.metrics.jobs.labels(event).inc()
                part.watch = self.watch  # one cursor for every part
        s = self.settings
        backend = self._backend()
        # Said once when the backend goes away, and once when it is back; the parts that read it wait meanwhile.
        self.backend_seen = Reachability(f"backend at {backend.base_url}" if backend else "backend", s.poll_s, logger)
        self.scheduler = PogScheduler(self._round, interval_s=s.pog_interval_s, jitter_s=s.pog_jitter_s,
                                      max_concurrent=s.pog_concurrency, max_retries=s.pog_retries,
                                      backoff_s=s.pog_backoff_s)

    def ensure_staked(self) -> int:
        """Stakes `settings.stake_wei` when the bonded stake is below what PoG rounds require."""
        required = self.pog.functions.minVerifierStake().call()
        stake: int = self.staking.functions.stakeOf(self.chain.address).call()
        if stake < required:
            self.chain.send(self.staking.functions.stake(), value=max(self.settings.stake_wei, required - stake))
            stake = self.staking.functions.stakeOf(self.chain.address).call()
            logger.info("verifier %s staked: now %s wei", self.chain.address, stake)
        return stake

    def providers(self) -> list[ProviderState]:
        assert self.watch is not None
        self.watch.refresh()
        addresses = sorted(Web3.to_checksum_address(a) for a in self.watch.ids(PROVIDER))
        self.metrics.providers.set(len(addresses))
        others = [a for a in addresses if a != self.chain.address]
        views = self._provider_views
        values = iter(read_batched(self.chain.web3, [view.request(a) for a in others for view in views],
                                   [view.decode for _ in others for view in views]))
        # A provider with no round on record (pogStatusOf's timestamp is zero) is benchmarked on
        # the next tick: it cannot take jobs before. One that failed waits its interval.
        return [ProviderState(a, next(values), next(values), next(values).timestamp != 0) for a in others]

    def open_challenges(self) -> list[int]:
        """PoG challenges this verifier opened that are not resolved yet."""
        assert self.watch is not None
        self.watch.refresh()
        ids = self.watch.ids(POG_CHALLENGE)
        live = [i for i in ids if self.challenges.functions.challenge(i).call().status
                in (ChallengeStatus.OPEN, ChallengeStatus.ANSWERED)]
        self.watch.forget(POG_CHALLENGE, set(ids) - set(live))
        return live

    def tick(self) -> None:
        """One pass: due rounds, then every open challenge moved towards its end. Each provider's
        round and each challenge is handled on its own: whatever one provider does (a front-run,
        a revert, a garbage reply) is logged with its ids and the others go on."""
        for report in self.scheduler.tick(self.providers()):
            self.metrics.rounds.labels(report.outcome.value).inc()
        self.end_rounds()
        for challenge_id in self.open_challenges():
            try:
                state = self._pog().follow_up(challenge_id)
            except NodeUnavailable:
                raise  # nothing else can move either
            except Exception:
                logger.exception("challenge %s: follow-up failed; retried next tick", challenge_id)
                self.metrics.challenges.labels("error").inc()
                continue
            if state is not ChallengeState.WAITING:
                self.metrics.challenges.labels(state.value).inc()
                logger.info("challenge %s: %s", challenge_id, state.value)
                self._report_pog_end(challenge_id, state)
        if self.backend_reachable():
            for part in (self.auditor, self.committee, self.slasher):
                if part is not None:
                    part.tick()
        self.withdraw_rewards()

    def backend_reachable(self) -> bool:
        """Whether the backend answers (any answer: a failing one is its parts' to judge). A
        change is said in one line; while it is away, the parts that read it are not run, so a
        backend down for an hour costs no line a tick."""
        backend = self._backend()
        if backend is None:
            return True
        try:
            backend.send("GET", "/health", what="health", auth=None)  # no sign-in for a health check
        except BackendUnavailable:
            self.backend_seen.lost()
            return False
        self.backend_seen.answered()
        return True

    def end_rounds(self) -> None:
        """Every round we requested ends attested, failed or voided by us: the ones their run left
        open (a provider silent past its commit deadline, roots committed but never sent to us,
        a run cut short by our restart) are ended here once the contract allows it. No round is
        in flight meanwhile: the scheduler's tick has returned."""
        assert self.watch is not None
        self.watch.refresh()
        ended = set()
        for round_id in self.watch.ids(POG_ROUND):
            try:
                if self._pog().end_round(round_id) is not None:
                    ended.add(round_id)
            except NodeUnavailable:
                raise
            except Exception:
                logger.exception("PoG round %s: could not be ended; retried next tick", round_id)
        self.watch.forget(POG_ROUND, ended)

    def withdraw_rewards(self) -> int:
        """Pulls what the challenge contract owes us (returned bonds, bonds won); returns wei."""
        owed: int = self.challenges.functions.owedTo(self.chain.address).call()
        if owed:
            try:
                receipt = self.chain.send(self.challenges.functions.withdraw())
            except TransactionReverted as exc:
                logger.warning("withdraw of %s wei refused: %s", owed, exc)
                return 0
            logger.info("verifier %s withdrew %s wei, tx %s", self.chain.address, owed, receipt["transactionHash"].hex())
        return owed

    def run_forever(self) -> None:
        self.ensure_staked()
        while True:
            try:
                self.tick()
            except NodeUnavailable as exc:
                logger.warning("chain unavailable, retrying: %s", exc)
            except BackendUnavailable as exc:  # in the middle of a part's tick
                if exc.status is None:  # it went away
                    self.backend_seen.lost()
                else:
                    logger.warning("backend: %s; the next tick tries again", exc)
            except Exception:  # e.g. another verifier won a race for the same challenge: the chain holds the state, retry from it
                logger.exception("tick failed; the next tick starts again from the chain")
            time.sleep(self.settings.poll_s)

    def _pog(self, link: ProverLink | None = None) -> OnchainPog:
        s = self.settings
        return OnchainPog(self.chain, link, k=s.k, dtype=s.pog_dtype, n=s.pog_n,
                          attester=NvAttester(str(s.nv_python)) if s.nv_python else None)

    def _round(self, provider: str) -> bool:
        try:
            outcome = self._pog(self.link_for(provider)).run_round(provider)
        except (LinkDown, NodeUnavailable, SeedNotFixed) as exc:
            raise TransientRoundError(str(exc)) from exc
        except Exception as exc:  # one provider's round must never stop the others' (or the follow-ups)
            logger.exception("provider %s: PoG round failed unexpectedly; retried with backoff", provider)
            raise TransientRoundError(f"{type(exc).__name__}: {exc}") from exc
        backend = self._backend()
        if backend is not None:
            decision: Decision = "passed" if outcome.passed else "challenged"
            for challenge_id in outcome.challenge_ids or (None,):
                backend.report("pog", outcome.round_id, decision, challenge_id=challenge_id,
                               detail=f"provider {provider}: {outcome.detail}")
            if outcome.verdict is not None:
                backend.record_devices(outcome.round_id, outcome.verdict.gpus)
        return outcome.passed

    def _backend(self) -> VerifierBackend | None:
        """The backend session that decisions are reported to (the job parts hold it; a
        verifier running PoG rounds alone reports nothing)."""
        part = self.auditor or self.committee
        return part.backend if part is not None else None

    def _report_pog_end(self, challenge_id: int, state: ChallengeState) -> None:
        decision = _POG_END_DECISIONS.get(state)
        backend = self._backend()
        if decision is None or backend is None:
            return
        round_id = self.challenges.functions.challenge(challenge_id).call().subject
        backend.report("pog", round_id, decision, challenge_id=challenge_id, detail=state.value)


# A challenge the contract dismissed has no decision of ours to report (the indexer shows the
# contract's ChallengeClosed status); only outcomes the contract confirmed are reported.
_POG_END_DECISIONS: dict[ChallengeState, Decision] = {
    ChallengeState.SLASHED_TIMEOUT: "timeout_claimed",
    ChallengeState.SLASHED_FRAUD: "fraud_proven",
    ChallengeState.SETTLED: "settled",
}


__all__ = ["Outcome", "VerifierMetrics", "VerifierService"]
