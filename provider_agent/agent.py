"""Assembles the agent's parts from `Settings`: signing account, chain client, content cache,
local records, job service. One `Agent` per process (built lazily by the Celery worker)."""

from __future__ import annotations

import functools
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount

from client.backend_http import ApiError, BackendUnavailable
from client.errors import ClientError
from client.keystore import load_keystore
from client.log_follower import Event
from client.reachability import Reachability
from client.task_auth import ChainRoles, TaskAuth, UsedNonces, domain_of
from client.watched_ids import WatchedIds, open_state
from protocol.enums import ChallengeKind, ChallengeStatus, RoundStatus
from protocol.ids import ChallengeId
from protocol.ids import Wei
from provider_agent.leases import LeaseService, LeaseWatcher
from provider_agent import ProviderAgentError
from provider_agent.backend_client import BackendClient
from provider_agent.cache import ContentCache, ContentSource, DirectorySource, HttpSource
from provider_agent.chain import ProviderChain
from provider_agent.committer import Committer
from provider_agent.gpus import Device, detect
from provider_agent.jobs import Activity, JobService, OutputStore
from provider_agent.mining import MiningPolicy, MiningSupervisor, ReferenceMiner, yield_floor_wei_per_gpu_hour
from provider_agent.pog_service import PogService
from provider_agent.runner import Limits, prewarm
from provider_agent.settings import Settings, get_settings
from provider_agent.state import SIGNED, JobStore

logger = logging.getLogger(__name__)


class ConfigurationError(ProviderAgentError):
    """The settings do not describe a runnable agent (no keystore, no content source)."""


@dataclass
class Agent:
    settings: Settings
    chain: ProviderChain
    jobs: JobService
    pog: PogService
    devices: list[Device]
    activity: Activity
    mining: MiningSupervisor | None = None
    backend: BackendClient | None = None
    challenges: WatchedIds | None = None  # challenges of our roots, from ChallengeManager's events
    leases: LeaseService | None = None
    committer: Committer | None = None  # started by the worker (provider_agent.worker)
    lease_watcher: LeaseWatcher | None = None  # ends our leases once due; started by the worker

    def __post_init__(self) -> None:
        if self.challenges is None:
            self.challenges = watch_challenges(self.chain, self.settings.state_db)
        if self.committer is None:
            self.committer = Committer(self.jobs, self.settings.commit_interval_s)
        if self.lease_watcher is None and self.leases is not None:
            self.lease_watcher = LeaseWatcher(self.leases, self.settings.state_db, self.settings.lease_check_s)

    @functools.cached_property
    def task_auth(self) -> TaskAuth:
        """Signs what this agent sends through the broker and checks what it consumes."""
        deployment = self.chain.deployment
        return TaskAuth(domain_of(deployment), self.chain.account,
                        ChainRoles(self.chain.web3, deployment, self.chain.address),
                        used=UsedNonces(self.settings.task_nonces_db))

    @classmethod
    def build(cls, settings: Settings, account: LocalAccount | None = None) -> "Agent":
        """`account` when the caller opened the keystore already; else it is opened here
        (password file, UNCHAINED_PASSWORD_FILE or a prompt: client.keystore)."""
        if account is None:
            if settings.keystore is None:
                raise ConfigurationError("no keystore: set UNCHAINED_PROVIDER_KEYSTORE or pass --keystore")
            account = load_keystore(settings.keystore, settings.password_file)
        chain = ProviderChain.connect(settings.rpc_url, account, settings.deployments_dir, settings.deployment_file)
        # The backend session signs in with this account; the key stays in this process.
        backend = (BackendClient(settings.backend_url, account, settings.session_lifetime_s)
                   if settings.backend_url else None)
        cache = ContentCache(settings.cache_dir, settings.cache_bytes, _source(settings, backend))
        activity = Activity()
        limits = Limits(settings.job_memory_bytes, settings.job_timeout_s)  # one thread, as verifiers run it
        prewarm(limits)
        jobs = JobService(chain, cache, JobStore(settings.state_db), OutputStore(settings.outputs_dir), limits,
                          backend, activity, commit_margin_s=settings.commit_latency_s + settings.commit_interval_s)
        logger.info("agent for provider %s on chain %s", account.address, chain.deployment.chain_id)
        devices = detect(settings.cpu_device_id)
        mining = None
        if settings.mining:
            miner = ReferenceMiner(devices[0].spec if not devices[0].is_cpu else "cpu",
                                   settings.mining_difficulty_bits, settings.mining_batch)
            mining = MiningSupervisor(miner, MiningPolicy(settings.mining_policy, settings.mining_co_run_duty,
                                                          settings.mining_resume_after_s))
            activity.started.append(mining.job_started)
            activity.finished.append(mining.job_finished)
        leases = LeaseService.build(settings, chain, backend, len(devices), mining)
        return cls(settings, chain, jobs, PogService(chain, devices), devices, activity, mining, backend, leases=leases)

    def beat(self) -> None:
        """Tells the backend this agent is alive (every heartbeat); a failure is logged."""
        if self.backend is None:
            return
        try:
            self.backend.heartbeat(self.chain.address)
        except ApiError as exc:
            if isinstance(exc, BackendUnavailable) and exc.status is None:  # no answer: said once, and once back
                self.backend_seen.lost()
            elif exc.status == 404:  # registered a moment ago: listed once the backend indexed that block
                logger.info("provider %s: the backend does not list it yet (it indexes the registration); "
                            "the next heartbeat tries again", self.chain.address)
            else:
                logger.warning("provider %s: heartbeat to the backend failed: %s", self.chain.address, exc)
        else:
            self.backend_seen.answered()

    @functools.cached_property
    def backend_seen(self) -> Reachability:
        where = self.backend.base_url if self.backend is not None else "?"
        return Reachability(f"backend at {where}", self.settings.heartbeat_s, logger)

    def register(self) -> bool:
        """Stakes and registers this box's devices when not registered yet."""
        s = self.settings
        return self.chain.ensure_registered(s.gpu_model, [d.uuid_hash for d in self.devices],
                                            Wei(s.price_per_gpu_hour_wei), Wei(s.price_per_job_unit_wei),
                                            s.metadata_uri, Wei(s.stake_wei))

    def leave(self) -> Wei:
        """Leaves the market: deactivates, withdraws what is owed, starts unbonding the stake;
        returns what was withdrawn. A result signed and not committed yet promises its commit:
        unbonding first would make that commit fail (below the minimum stake) and the signed
        result slashable, so those are committed first (and the unbond then waits, as the
        escrow's stake lock says, until they are paid: StakingWorkOpen)."""
        if self.jobs.store.with_status(SIGNED):
            self.committer.commit_signed()
        if left := [r.job_id for r in self.jobs.store.with_status(SIGNED)]:
            raise ProviderAgentError(f"jobs {left} are signed but not committed yet; their commits must land "
                                     "before the stake starts unbonding (leave again once they are)")
        withdrawn = self.chain.withdraw_all()
        self.chain.leave()
        return withdrawn

    def answer_challenge(self, challenge_id: ChallengeId) -> str:
        """Answers an on-chain challenge of our roots, whichever kind; returns the tx hash."""
        if self.chain.challenge(challenge_id).kind == ChallengeKind.POG:
            return self.pog.answer_challenge(challenge_id)
        return self.jobs.answer_challenge(challenge_id)

    def live_challenges(self) -> list[ChallengeId]:
        """Challenges of our roots that are not over: new ones from the events after the cursor;
        those that ended (settled, slashed, dismissed) are dropped from the watch."""
        assert self.challenges is not None
        self.challenges.refresh()
        ids = [ChallengeId(i) for i in self.challenges.ids("challenge")]
        ended = [cid for cid in ids if self.chain.challenge(cid).status not in (ChallengeStatus.OPEN, ChallengeStatus.ANSWERED)]
        self.challenges.forget("challenge", ended)
        return [cid for cid in ids if cid not in ended]

    def answer_open_challenges(self, live: list[ChallengeId] | None = None) -> list[str]:
        """Answers every open challenge against us: nobody has to tell the provider, a missed
        deadline is slashed, so the agent watches the chain itself. `live`: live_challenges()
        when the caller read them already this beat."""
        answered = []
        for challenge_id in self.chain.open_challenges(self.live_challenges() if live is None else live):
            try:
                answered.append(self.answer_challenge(challenge_id))
            except (ProviderAgentError, ClientError) as exc:
                logger.error("challenge %s: cannot answer: %s", challenge_id, exc)
        return answered

    def commit_forgotten_rounds(self) -> list[int]:
        """Commits roots for our PoG rounds whose seed the verifier fixed on-chain but whose
        secret never reached us (or whose task was lost): once half the commit window has passed
        since the seed was fixed, the round is computed from the chain's seed and committed
        before the contract's deadline, so no honest provider is marked failed for a hand-over
        that never came. (Earlier, the verifier's own hand-over is awaited: computing twice
        would slow the timed round.) Rounds that ended are dropped from the watch."""
        assert self.challenges is not None
        self.challenges.refresh()
        window = self.chain.contract("ProofOfGpu").functions.commitWindow().call()
        committed, ended = [], []
        for round_id in self.challenges.ids("round"):
            r = self.pog.round_of(round_id)
            now = self.chain.now()
            if r.status != RoundStatus.REQUESTED or now > r.commitDeadline:
                ended.append(round_id)
            elif r.seed != bytes(32) and now >= r.commitDeadline - window // 2:
                try:
                    self.pog.commit_onchain(round_id)
                    committed.append(round_id)
                except (ProviderAgentError, ClientError) as exc:
                    logger.error("PoG round %s: cannot commit: %s", round_id, exc)
        self.challenges.forget("round", ended)
        return committed

    def settle_answered(self, live: list[ChallengeId] | None = None) -> list[ChallengeId]:
        """Settles our answered challenges whose windows passed (ProviderChain.settle_answered).
        No live challenge, no chain read (the windows and the time are read only for some)."""
        ids = self.live_challenges() if live is None else live
        return self.chain.settle_answered(ids) if ids else []

    def publish_yield(self) -> int:
        """Publishes the mining yield as the floor under the price per GPU-hour: raises the
        on-chain price when it is below, records the yield in the registry metadata and tells
        the backend. Returns the floor (wei per GPU-hour)."""
        if self.mining is None:
            return 0
        floor = yield_floor_wei_per_gpu_hour(self.mining.miner.hashrate(), self.settings.mining_wei_per_terahash)
        info = self.chain.provider_info()
        if info["price_per_gpu_hour"] < floor:
            self.chain.set_prices(floor, info["price_per_job_unit"])
        meta = {"miningYieldWeiPerGpuHour": str(floor), "miner": self.mining.miner.name,
                "hashrate": round(self.mining.miner.hashrate(), 1)}
        self.chain.set_metadata_uri("data:application/json," + json.dumps(meta, separators=(",", ":")))
        if self.backend is not None:
            try:  # the on-chain metadata above is the record; the backend's copy follows the next heartbeat
                self.backend.report_mining(self.chain.address, meta)
            except ApiError as exc:
                logger.warning("provider %s: mining report to the backend failed: %s", self.chain.address, exc)
        logger.info("provider %s: mining yield floor %s wei per GPU-hour published", self.chain.address, floor)
        return floor

    def status(self) -> dict[str, Any]:
        """What `unchained provider status` and /metrics show."""
        info = self.chain.provider_info() if self.chain.is_registered() else {}
        records = self.jobs.store.all()
        owed = self.chain.owed()
        mining = self.mining
        return {
            "address": self.chain.address,
            "registered": bool(info),
            "active": self.chain.is_active(),
            "stake_wei": self.chain.stake_of(),
            "pog_class": info.get("pog_class", ""),
            "pog_passed": info.get("pog_passed", False),
            "devices": [(d.spec, d.name) for d in self.devices],
            "jobs": {status: sum(r.status == status for r in records)
                     for status in ("running", "computed", "signed", "committed", "finalized", "failed",
                                    "rejected", "refunded")},
            "earnings_owed_wei": sum(owed.values()),
            "mining_state": mining.state if mining else "off",
            "hashrate": mining.miner.hashrate() if mining else 0.0,
            "shares": len(getattr(mining.miner, "shares", [])) if mining else 0,
            "items_per_s": mining.telemetry.items_per_s if mining else 0.0,
        }


def watch_challenges(chain: ProviderChain, state_db: Path) -> WatchedIds:
    """The challenges against `chain.address`, and the PoG rounds requested for it, followed in
    the agent's state file."""
    me = chain.address.lower()

    def ours(event: Event) -> tuple[str, int] | None:
        if event.args["provider"] != me:
            return None
        if event.name == "RoundRequested":
            return "round", int(event.args["roundId"])
        return "challenge", int(event.args["challengeId"])

    return WatchedIds(chain.web3, chain.deployment, open_state(state_db), f"challenges-of-{me}",
                      {"ChallengeManager": ["PogChallenged", "JobChallenged"],
                       "ProofOfGpu": ["RoundRequested"]}, ours)


def _source(settings: Settings, backend: BackendClient | None) -> ContentSource:
    if settings.content_dir is not None:
        return DirectorySource(settings.content_dir)
    if backend is not None:  # signed in: a job's inputs and private model are served to its provider only
        return HttpSource(backend.base_url, settings.content_path, auth=backend.session)
    raise ConfigurationError("no content source: set UNCHAINED_PROVIDER_BACKEND_URL or _CONTENT_DIR")


_agent: Agent | None = None
_agent_lock = threading.Lock()


def get_agent() -> Agent:
    """The process's agent, built on first use (the Celery worker's tasks share it)."""
    global _agent
    with _agent_lock:
        if _agent is None:
            _agent = Agent.build(get_settings())
        return _agent


def built_agent() -> Agent | None:
    """The process's agent if it was built (builds nothing)."""
    with _agent_lock:
        return _agent


def use_agent(agent: Agent) -> Agent:
    """Makes `agent` the process's agent: `provider run` builds it with the account it opened,
    so the password is asked once and never handed on through the environment."""
    global _agent
    with _agent_lock:
        _agent = agent
    return agent
