"""What a watcher of a running market sees, as it happens: Proof-of-GPU rounds and their classes,
jobs moving from funded to settled, leases, challenges, slashes and the providers' miners.

Everything comes from where anybody could read it: the backend's public API (its index of the
chain), the chain's Staking events, and each provider agent's /status page. `poll` returns the
lines that are new since the last call and keeps every event it saw for the caller to check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from client.log_follower import Batch, LogFollower, MemoryCursorStore

from devtools.market import LocalMarket, eth

_JOB_VERBS = {"funded": "funded", "accepted": "accepted", "committed": "committed its output root for",
              "finalized": "finalized", "refunded": "refunded"}


@dataclass(frozen=True)
class FeedEvent:
    kind: str  # pog | job | lease | challenge | slash | mining
    subject: str  # a round, job, lease or challenge id, or a party's name
    state: str
    text: str


@dataclass
class MarketFeed:
    market: LocalMarket
    events: list[FeedEvent] = field(default_factory=list)
    _seen: dict[tuple[str, str], str] = field(default_factory=dict)
    _slashes_seen: MemoryCursorStore = field(default_factory=MemoryCursorStore)  # the Slashed follower's cursor

    def __post_init__(self) -> None:
        self.names = {p.address.lower(): name for name, p in self.market.parties.items()}

    def who(self, address: str | None) -> str:
        return self.names.get((address or "").lower(), address or "?")  # never cut: it must be copyable

    def poll(self) -> list[str]:
        before = len(self.events)
        try:
            self._pog_rounds()
            self._jobs()
            self._leases()
            self._challenges()
        except (httpx.HTTPError, ValueError):
            pass  # the backend is restarting or behind: the next poll catches up
        self._slashes()
        self._miners()
        return [e.text for e in self.events[before:]]

    def state(self, kind: str, subject: object) -> str | None:
        return self._seen.get((kind, str(subject)))

    def seen(self, kind: str, state: str, subject: object | None = None) -> bool:
        return any(e.kind == kind and e.state == state and (subject is None or e.subject == str(subject))
                   for e in self.events)

    def _note(self, kind: str, subject: object, state: str, text: str) -> None:
        key = (kind, str(subject))
        if self._seen.get(key) != state:
            self._seen[key] = state
            self.events.append(FeedEvent(kind, str(subject), state, text))

    def _pog_rounds(self) -> None:
        for r in reversed(self.market.api("/pog/rounds", limit=200)):  # type: ignore[arg-type]
            provider, verifier = self.who(r["provider"]), self.who(r["verifier"])
            if r["status"] == "attested" and r["passed"]:
                seconds = max(r["measured_millis"] or 0, 1) / 1000
                gflops = 2 * r["n"] ** 3 / seconds / 1e9  # the verifier's clock, seed to root
                text = (f"PoG round {r['round_id']}: [green]{provider} passed[/green], class "
                        f"[bold]{r['gpu_class']}[/bold], {gflops:.2f} GFLOPS over {r['measured_millis']} ms "
                        f"seed to root (n={r['n']}, {verifier})")
                self._note("pog", r["round_id"], "passed", text)
            elif r["status"] in ("attested", "failed"):
                self._note("pog", r["round_id"], "failed",
                           f"PoG round {r['round_id']}: [red]{provider} failed[/red] ({verifier})")
            elif r["status"] == "requested":
                self._note("pog", r["round_id"], "requested",
                           f"PoG round {r['round_id']}: {verifier} asks {provider} for n={r['n']}")

    def _jobs(self) -> None:
        for j in reversed(self.market.api("/jobs", limit=500)):  # type: ignore[arg-type]
            status = j["status"]
            renter, provider = self.who(j["renter"]), self.who(j["provider"])
            detail = ""
            if status == "funded":
                detail = f" by {renter}: {eth(int(j['price']))} ETH in escrow for {provider}"
            elif status == "committed":
                detail = f" ({j['item_count']} items); challenge window open"
            elif status == "finalized":
                detail = f": {provider} paid {eth(int(j['provider_amount'] or 0))} ETH, fee {eth(int(j['fee'] or 0))}"
            elif status == "refunded":
                detail = f": {renter} refunded {eth(int(j['refund'] or 0))} ETH"
            actor = provider if status in ("accepted", "committed") else ""
            verb = _JOB_VERBS.get(status, status)
            text = f"job {j['job_id']}: {actor + ' ' if actor else ''}{verb}{' job' if actor else ''}{detail}"
            self._note("job", j["job_id"], status, text)

    def _leases(self) -> None:
        for lease in reversed(self.market.api("/leases", limit=500)):  # type: ignore[arg-type]
            renter, provider = self.who(lease["renter"]), self.who(lease["provider"])
            if lease["status"] == "ended":
                text = (f"lease {lease['lease_id']} ended: {provider} earned "
                        f"{eth(int(lease['provider_earned'] or 0))} ETH, {renter} refunded "
                        f"{eth(int(lease['renter_refund'] or 0))} ETH")
            else:
                text = (f"lease {lease['lease_id']}: {renter} rents {lease['gpu_count']} GPU of {provider}, "
                        f"paid {eth(int(lease['paid']))} ETH up front")
            self._note("lease", lease["lease_id"], lease["status"], text)

    def _challenges(self) -> None:
        for c in reversed(self.market.api("/challenges", limit=500)):  # type: ignore[arg-type]
            challenger, provider = self.who(c["challenger"]), self.who(c["provider"])
            what = f"PoG round {c['subject']}" if c["kind"] == "pog" else f"job {c['subject']}"
            if c["status"] == "open":
                text = (f"challenge {c['challenge_id']}: [yellow]{challenger} challenges {provider}'s {what}[/yellow] "
                        f"(k={c['k']}, bond {eth(int(c['bond']))} ETH)")
            else:
                text = f"challenge {c['challenge_id']} on {provider}'s {what}: {c['status'].replace('_', ' ')}"
            self._note("challenge", c["challenge_id"], c["status"], text)

    def _slashes(self) -> None:
        s = self.market.session
        if s is None:
            return
        follower = LogFollower.for_deployment(s.web3, s.deployment, self._slashes_seen, {"Staking": ["Slashed"]})
        follower.poll(self._note_slashes)

    def _note_slashes(self, batch: Batch) -> None:
        for e in batch.events:
            a = e.args
            self._note("slash", f"{e.tx_hash}:{e.log_index}", "slashed",
                       f"[bold red]{self.who(a['offender'])} slashed {eth(a['slashed'])} ETH[/bold red] "
                       f"({eth(a['reward'])} ETH to {self.who(a['rewardRecipient'])}, the rest to the treasury)")

    def _miners(self) -> None:
        for plan in self.market.plan.providers:
            if not plan.mining or not self.market.services.get(plan.name) or not self.market.services[plan.name].alive:
                continue
            status = self.market.provider_status(plan.name)
            if status is None:
                continue
            state = status["mining_state"]
            rate = f", {status['hashrate']:,.0f} H/s" if state == "mining" else ""
            self._note("mining", plan.name, state, f"{plan.name}'s miner: {state}{rate}")
