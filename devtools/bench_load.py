"""Load benchmark: many renters buy jobs from several providers on one machine, all settled.

The whole market runs as real processes (devtools/market.py: anvil, a private Redis, the
backend, provider agents, a verifier). Renter threads, each with its own keystore, fund jobs
through `renter.orders.submit_job` and spread them round-robin over the providers; the run ends
when every job is settled on-chain (the providers finalize their own jobs once the challenge
window is over). Run by `unchained bench` (section `load`) and, with a
tiny load, by tests/cli/test_bench_load.py.

Clocks: a submit is timed on the renter's clock (uploads, quote, spec, funding transaction up
to its receipt); funded -> committed and funded -> finalized are block timestamps (JobCreated,
ResultCommitted, JobFinalized), so they have a 1 s resolution; throughput is on the local clock
from the first submit: until the last result is available (delivered) and until every job is
seen settled (which adds the last job's challenge window).

Result available: when the backend holds the job's result for its renter, on the local clock
from the funding receipt. A backend that stamps it (`result_available_at` on `GET /jobs/{id}`)
is read once per job after the run; otherwise the run watches for it: a committed job's result
counts as available when `GET /jobs/{id}/result` first shows every item's output uploaded
(polled every POLL_S, so up to that much late).

CPU: every market process's CPU time (children included, process_cpu) is read when the renters
start and when the last job settles; the difference per job and per process kind says where
the machine's cores went. A fixed pure-Python loop (cpu_loop_s) is timed before the market starts
and after the last job settles: the machine's speed of the moment, so that jobs/s compare across
machines (and across runs on one machine whose speed drifts).
"""

from __future__ import annotations

import datetime as dt
import io
import math
import os
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
# Imported here, not on first use: numpy loads its random module lazily, and twenty renter threads
# reaching it at once recurse in that loader (RecursionError).
from numpy.random import default_rng
import torch
from rich.console import Console

from client.backend_http import ApiError
from renter.client import BackendClient
from renter.errors import RenterError
from renter.orders import submit_job
from renter.wallet import Wallet
from client.contracts import read_batched
from client.keepalive import http_client
from client.keystore import load_keystore
from client.log_follower import Batch, Event, EventDecoder, LogFollower, MemoryCursorStore
from protocol.escrow_job import EscrowJob
from protocol.jobs import encode_output
from devtools.session import ChainSession
from devtools.market import (
    ETH, FAST_PARAMS, LocalMarket, MarketError, MarketPlan, Party, ProviderPlan, dev_account, wait_for)
from devtools.process_cpu import CpuMeter, CpuUsage, Root
from verifier.audit_draw import AuditDraw

MAX_PRICE_WEI = ETH // 20
POLL_S = 1.0
CPU_LOOP_N = 20_000_000  # sum(range(CPU_LOOP_N)): 0.33-0.64 s on the project's machines so far


@dataclass(frozen=True)
class Load:
    providers: int = 5
    renters: int = 20
    jobs_per_renter: int = 10
    items_per_job: int = 4
    challenge_window_s: int = 20  # FAST_PARAMS says 45; shorter so the run is not mostly waiting
    settle_timeout_s: float = 1200.0

    @property
    def jobs(self) -> int:
        return self.renters * self.jobs_per_renter


@dataclass(frozen=True)
class Submitted:
    job: EscrowJob  # as funded
    items: int
    submit_s: float  # local clock, the whole submit_job call
    funded_s: float  # local clock, since the first submit
    funded_at: float  # wall clock (Unix time) at the funding receipt


@dataclass
class LoadResult:
    load: Load
    submitted: list[Submitted]
    submit_errors: list[str]
    created: dict[int, int]  # job id -> block timestamp of JobCreated
    committed: dict[int, int]  # ... of ResultCommitted
    finalized: dict[int, list[int]]  # ... of every JobFinalized (exactly one each when all is well)
    refunded: dict[int, str]  # job id -> why (event, and the provider's failure report if any)
    wall_s: float  # first submit until every job was seen settled (or the timeout)
    funding_s: float  # first submit until the last job was funded
    unaccounted: int  # Ledger after withdraw_all: wei lost or created, 0 when nothing is
    providers: dict[str, str] = field(default_factory=dict)  # address -> name
    available: dict[int, float] = field(default_factory=dict)  # job id -> wall clock its result was available
    available_source: str = ""  # what marked it (the backend's stamp, or the bench's polling)
    started_at: float = 0.0  # wall clock of the first submit
    audited: set[int] = field(default_factory=set)  # jobs a verifier reported a decision on (passed or challenged)
    drawn: set[int] = field(default_factory=set)  # jobs some verifier had to audit (verifier.audit_draw)
    floors: list[float] = field(default_factory=list)  # each job's least audit probability
    cpu: CpuUsage | None = None  # the market's CPU over the run, by process kind
    cpu_loop_s: tuple[float, float] = (0.0, 0.0)  # the fixed loop before the run and after it (cpu_loop_s)

    @property
    def unsettled(self) -> list[int]:
        done = self.finalized.keys() | self.refunded.keys()
        return sorted(s.job.id for s in self.submitted if s.job.id not in done)

    @property
    def finalized_twice(self) -> list[int]:
        return sorted(j for j, times in self.finalized.items() if len(times) > 1)

    @property
    def all_settled(self) -> bool:
        """Every requested job funded and finalized exactly once, none refunded, no wei lost."""
        ids = {s.job.id for s in self.submitted}
        return (len(ids) == self.load.jobs and not self.submit_errors and set(self.finalized) == ids
                and not self.finalized_twice and not self.refunded and self.unaccounted == 0)


def plan_for(load: Load) -> MarketPlan:
    """Providers on anvil keys 1..P, one verifier after them, then the renters. PoG runs once
    per provider at the start (interval one hour): the run measures jobs, not PoG rounds."""
    providers = tuple(ProviderPlan(f"provider-{i + 1}", 1 + i, mining=False) for i in range(load.providers))
    verifier = load.providers + 1
    return MarketPlan(providers=providers, verifiers=(verifier,),
                      renters=tuple(range(verifier + 1, verifier + 1 + load.renters)),
                      params=replace(FAST_PARAMS, challenge_window=load.challenge_window_s),
                      pog_interval_s=3600.0)


def tiny_model() -> bytes:
    """TorchScript of a 8 -> 4 linear layer with tanh: the job is the market, not the model."""
    torch.manual_seed(0)
    module = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Tanh()))
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    return buffer.getvalue()


def job_inputs(renter: int, job: int, items: int) -> list[bytes]:
    """Distinct items per job, so no upload or output is a cached duplicate of another."""
    rng = default_rng([renter, job])
    return [encode_output(rng.standard_normal(8).astype(np.float32)) for _ in range(items)]


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def cpu_loop_s() -> float:
    """This process's CPU seconds for sum(range(CPU_LOOP_N)), best of three: the speed of one core
    now (CPU time, not wall time: other work on the machine does not count, a slower core does)."""
    best = math.inf
    for _ in range(3):
        start = time.process_time()
        sum(range(CPU_LOOP_N))
        best = min(best, time.process_time() - start)
    return best


def run(load: Load, root: Path, console: Console) -> LoadResult:
    loop_before = cpu_loop_s()
    market = LocalMarket(plan_for(load), root)
    try:
        market.start(console.log)
        providers = market.providers()
        wait_pog(market, providers)
        console.log(f"{len(providers)} providers passed Proof of GPU; {load.renters} renters start "
                    f"{load.jobs} jobs of {load.items_per_job} items (challenge window {load.challenge_window_s} s)")
        ledger = market.ledger().open()
        model_hash = push_model(market, market.renters()[0])
        meter = CpuMeter(market_processes(market)).start()
        result = drive(market, load, model_hash, providers, ledger.start_block, console)
        result.cpu = meter.stop()
        result.cpu_loop_s = (loop_before, cpu_loop_s())
        market.withdraw_all()
        result.unaccounted = ledger.close().unaccounted
        result.providers = {p.address.lower(): p.name for p in providers}
        return result
    finally:
        market.stop()


def market_processes(market: LocalMarket) -> dict[str, list[Root]]:
    """The market's processes by kind for the CPU meter: each service's own process apart from
    its sandboxed children (model runs: the provider's jobs, the verifier's re-executions, the
    backend's model checks), and this process, whose threads are the renters and the observer."""
    def own(name: str) -> Root:
        proc = market.services[name].proc
        assert proc is not None
        return Root(proc.pid, tree=False)

    def children(name: str) -> Root:
        return replace(own(name), tree=True, without_root=True)

    providers = [p.name for p in market.plan.providers]
    verifiers = [f"verifier-{i + 1}" for i in range(len(market.plan.verifiers))]
    assert market.chain.process is not None
    groups = {"anvil": [Root(market.chain.process.pid)]}
    if market.broker.server is not None and market.broker.server.proc is not None:
        groups["redis (the market's broker)"] = [Root(market.broker.server.proc.pid)]
    groups |= {
        "backend (API, indexer and dispatcher: one process)": [own("backend")],
        "backend model checks (renters' dry runs, sandboxed)": [children("backend")],
        f"provider agents ({len(providers)}: worker, heartbeat, transactions)": [own(n) for n in providers],
        "provider job runs (sandbox templates and job children)": [children(n) for n in providers],
        f"verifiers ({len(verifiers)}: audits, PoG)": [own(n) for n in verifiers],
        "verifier re-executions (sandboxed)": [children(n) for n in verifiers],
        f"renters ({len(market.renters())} threads) and the bench's observer: this process": [Root(os.getpid(), tree=False)],
    }
    return groups


def wait_pog(market: LocalMarket, providers: list[Party], timeout: float = 300.0) -> None:
    def passed() -> bool:
        return all(market.api(f"/providers/{p.address}").get("pog_passed") for p in providers)

    if not wait_for(passed, timeout, 1.0):
        raise MarketError(f"providers did not pass Proof of GPU in {timeout:.0f} s:\n"
                          f"{market.services['verifier-1'].tail()}")


def push_model(market: LocalMarket, renter: Party) -> str:
    client = BackendClient.connect(market.backend_url, load_keystore(renter.keystore, market.password_file))
    try:
        return client.push_model(tiny_model(), "load-tiny.pt", "torchscript", private=False)["content_hash"]
    finally:
        client.close()


def drive(market: LocalMarket, load: Load, model_hash: str, providers: list[Party], first_block: int,
          console: Console) -> LoadResult:
    """Renter threads submit; this thread follows the chain until every funded job settles."""
    submitted: list[Submitted] = []
    errors: list[str] = []
    lock = threading.Lock()
    start, started_at = time.monotonic(), time.time()

    def renter_loop(index: int, renter: Party) -> None:
        account = load_keystore(renter.keystore, market.password_file)
        client = BackendClient.connect(market.backend_url, account)
        wallet = Wallet(market.chain.rpc_url, account, market.deployment_file)
        try:
            for j in range(load.jobs_per_renter):
                provider = providers[(index * load.jobs_per_renter + j) % len(providers)]
                began = time.monotonic()
                try:
                    # Every job has the same model and input shape: like a renter scripting a
                    # batch of jobs, each renter dry-runs its first job only.
                    job = submit_job(client, wallet, model_hash, job_inputs(index, j, load.items_per_job),
                                     MAX_PRICE_WEI, provider=provider.address, check=j == 0).job
                except (RenterError, ApiError) as exc:
                    with lock:
                        errors.append(f"{renter.name} job {j}: {exc}")
                    continue
                now, funded_at = time.monotonic(), time.time()
                with lock:
                    submitted.append(Submitted(job, load.items_per_job, now - began, now - start, funded_at))
        finally:
            client.close()

    reader = EventReader(market.session, first_block)
    results = ResultWatch(market.backend_url)
    with ThreadPoolExecutor(max_workers=load.renters, thread_name_prefix="renter") as pool:
        futures = [pool.submit(renter_loop, i, r) for i, r in enumerate(market.renters())]
        last_said = ""
        while True:
            submitting = not all(f.done() for f in futures)
            events = reader.read()
            with lock:
                ids: set[int] = {s.job.id for s in submitted}
                failed = len(errors)
            settled = ids & (set(events.finalized) | set(events.refunded))
            results.poll(ids & set(events.committed))
            said = (f"funded {len(ids)}/{load.jobs} (errors {failed}), committed {len(ids & set(events.committed))}, "
                    f"settled {len(settled)}")
            if said != last_said:
                console.log(said)
                last_said = said
            if not submitting and settled == ids:
                break
            if time.monotonic() - start > load.settle_timeout_s:
                console.log(f"[red]timeout after {load.settle_timeout_s:.0f} s: {len(ids - settled)} jobs unsettled")
                break
            time.sleep(POLL_S)
        for f in futures:
            f.result()  # re-raises what killed a renter thread other than a RenterError
    wall = time.monotonic() - start
    refunded = {j: f"{why}: {market.api(f'/jobs/{j}').get('failure') or 'no failure report'}"
                for j, why in events.refunded.items() if j in ids}
    available, source = results.finish(ids)
    return LoadResult(load, sorted(submitted, key=lambda s: s.job.id), errors, events.created, events.committed,
                      events.finalized, refunded, wall, max((s.funded_s for s in submitted), default=0.0), 0,
                      available=available, available_source=source, started_at=started_at,
                      audited=audited_jobs(market) & ids, **audit_draws(market, submitted))


def audit_draws(market: LocalMarket, submitted: list[Submitted]) -> dict:
    """The jobs each verifier drew for a mandatory audit and every job's floor, computed as the
    verifiers compute them (their keys are anvil's public development keys)."""
    slash = market.session.contract("ChallengeManager").functions.slashAmount().call()
    escrow = market.session.contract("JobEscrow").address
    draws = [AuditDraw.for_account(dev_account(index), slash) for index in market.plan.verifiers]
    drawn = {s.job.id for s in submitted if any(d.must_audit(escrow, s.job.id, s.job.price, s.items) for d in draws)}
    floors = [1 - math.prod(1 - d.floor(s.job.price, s.items) for d in draws) for s in submitted]
    return {"drawn": drawn, "floors": floors}


def audited_jobs(market: LocalMarket) -> set[int]:
    """Jobs some verifier reported a decision on (it audits each job in its challenge window)."""
    audited: set[int] = set()
    page = 500
    for offset in range(0, 1_000_000, page):
        reports = market.api("/disputes/reports", kind="job", limit=page, offset=offset)
        audited |= {int(r["subject"]) for r in reports if r["decision"] in ("passed", "challenged")}
        if len(reports) < page:
            return audited
    return audited


STAMP = "result_available_at"  # the backend's own stamp, where it has one (see the module docstring)


@dataclass
class ResultWatch:
    """When each job's result became available to its renter at the backend."""

    backend_url: str
    stamped: bool | None = None  # whether GET /jobs/{id} carries STAMP (asked once, of the first committed job)
    seen: dict[int, float] = field(default_factory=dict)  # job id -> wall clock the bench saw every output

    def __post_init__(self) -> None:
        self.http = http_client(self.backend_url, timeout=10)

    def poll(self, committed: set[int]) -> None:
        """Without the backend's stamp: looks at the results of committed jobs not yet complete."""
        waiting = sorted(committed - self.seen.keys())
        if not waiting:
            return
        if self.stamped is None:
            self.stamped = STAMP in self.http.get(f"/jobs/{waiting[0]}").raise_for_status().json()
        if self.stamped:
            return
        for job_id in waiting:
            response = self.http.get(f"/jobs/{job_id}/result")
            if response.status_code == 409:  # the backend has not indexed the commit yet
                continue
            items = response.raise_for_status().json()["items"]
            if items and all(item["digest"] for item in items):
                self.seen[job_id] = time.time()

    def finish(self, ids: set[int]) -> tuple[dict[int, float], str]:
        """Job id -> wall clock of availability, and what marked it."""
        try:
            if not self.stamped:
                return dict(self.seen), ("the bench saw every output uploaded (GET /jobs/{id}/result, "
                                         f"polled every {POLL_S:g} s)")
            stamps = {j: self.http.get(f"/jobs/{j}").raise_for_status().json().get(STAMP) for j in sorted(ids)}
            return {j: unix_time(v) for j, v in stamps.items() if v is not None}, f"the backend's `{STAMP}`"
        finally:
            self.http.close()


def unix_time(value: float | str) -> float:
    """A stamp as Unix time: a number already, or ISO 8601 (naive means UTC, as SQLite returns it)."""
    if isinstance(value, (int, float)):
        return float(value)
    stamp = dt.datetime.fromisoformat(value)
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)).timestamp()


@dataclass
class Events:
    """The escrow's job events since the run began, by job id, with their block timestamps."""

    created: dict[int, int] = field(default_factory=dict)
    committed: dict[int, int] = field(default_factory=dict)
    finalized: dict[int, list[int]] = field(default_factory=dict)
    refunded: dict[int, str] = field(default_factory=dict)  # job id -> the refunding event


@dataclass
class EventReader:
    """Follows the escrow's job events from `first_block` (each read asks only for new blocks)."""

    session: ChainSession
    first_block: int
    events: Events = field(default_factory=Events)
    stamps: dict[int, int] = field(default_factory=dict)  # block number -> timestamp, read once each

    def __post_init__(self) -> None:
        only = {"JobEscrow": ["JobCreated", "ResultCommitted", "JobFinalized", "JobExpired", "JobCancelled",
                              "JobFailed", "JobUnfrozen"]}
        web3 = self.session.web3
        self.follower = LogFollower(web3, EventDecoder(self.session.deployment, only), MemoryCursorStore(),
                                    start_block=self.first_block)

    def read(self) -> Events:
        self.follower.poll(self._add)
        return self.events

    def _add(self, batch: Batch) -> None:
        out = self.events
        unread = sorted({e.block_number for e in batch.events} - self.stamps.keys())
        # One round trip for the batch's blocks (a block per transaction here: a read per event was
        # most of this observer's CPU).
        self.stamps.update(zip(unread, read_batched(self.session.web3, [
            ("eth_getBlockByNumber", [hex(n), False]) for n in unread], [_timestamp] * len(unread))))
        for e in batch.events:
            job_id = int(e.args["jobId"])
            if e.name == "JobCreated":
                out.created[job_id] = self._stamp(e)
            elif e.name == "ResultCommitted":
                out.committed[job_id] = self._stamp(e)
            elif e.name == "JobFinalized":
                out.finalized.setdefault(job_id, []).append(self._stamp(e))
            elif e.name != "JobUnfrozen":
                out.refunded[job_id] = e.name
            elif e.args["providerAtFault"]:
                out.refunded[job_id] = "JobUnfrozen (provider at fault)"

    def _stamp(self, event: Event) -> int:
        return self.stamps[event.block_number]


def _timestamp(block: dict) -> int:  # type: ignore[type-arg]
    return int(block["timestamp"], 16)


def section(result: LoadResult) -> str:
    load, jobs, created, committed = result.load, result.submitted, result.created, result.committed
    to_commit = [committed[s.job.id] - created[s.job.id] for s in jobs if s.job.id in committed]
    to_final = [result.finalized[s.job.id][0] - created[s.job.id] for s in jobs if s.job.id in result.finalized]
    final_lag = [result.finalized[s.job.id][0] - committed[s.job.id] for s in jobs if s.job.id in result.finalized]
    submit_ms = [s.submit_s * 1000 for s in jobs]
    to_result = [result.available[s.job.id] - s.funded_at for s in jobs if s.job.id in result.available]
    settled = [s for s in jobs if s.job.id in result.finalized]
    items = sum(s.items for s in settled)
    funding_rate = len(jobs) / max(result.funding_s, 1e-9)
    delivered_s = max(result.available.values(), default=result.started_at) - result.started_at
    delivered_rate = len(result.available) / max(delivered_s, 1e-9)
    loop_s = statistics.mean(result.cpu_loop_s)
    per_provider = [f"{name} {sum(1 for s in jobs if s.job.provider.lower() == address)}"
                    for address, name in sorted(result.providers.items(), key=lambda kv: kv[1])]
    # The providers' pace: results delivered per second from the first to the last (their commits
    # go out in batches a block apart, so the gaps between commits no longer tell it).
    available = sorted(result.available.values())
    serving = (len(available) - 1) / (available[-1] - available[0]) \
        if len(available) > 1 and available[-1] > available[0] else float("nan")

    def row(name: str, values: list[float], unit: str) -> str:
        if not values:
            return f"| {name} | {unit} | | | | | 0 |"
        cells = " | ".join(f"{percentile(values, p):,.1f}" for p in (50, 90, 99)) + f" | {max(values):,.1f}"
        return f"| {name} | {unit} | {cells} | {len(values)} |"

    lines = [
        f"## Load ({load.jobs} jobs from {load.renters} renter wallets across {load.providers} providers, "
        f"{load.items_per_job} items each; anvil mines each transaction at once, challenge window "
        f"{load.challenge_window_s} s)",
        "",
        f"All settled: **{'yes' if result.all_settled else 'no'}**: {len(settled)} of {load.jobs} jobs finalized "
        f"(each exactly once: {'yes' if not result.finalized_twice else f'no, twice: {result.finalized_twice}'}), "
        f"{len(result.refunded)} refunded, {len(result.unsettled)} unsettled, "
        f"{len(result.submit_errors)} submit errors; "
        f"unaccounted wei after every party withdrew: {result.unaccounted}. "
        f"Jobs per provider: {', '.join(per_provider)}.",
        "",
        "| latency | clock | p50 | p90 | p99 | max | jobs |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        row("submit (upload, quote, spec, funding tx to receipt)", submit_ms, "renter, ms"),
        row("funded (JobCreated) -> committed", to_commit, "block time, s"),
        row("funded (renter's receipt) -> result available", to_result, "local, s"),
        row("funded (JobCreated) -> finalized", to_final, "block time, s"),
        row(f"committed -> finalized (window {load.challenge_window_s} s)", final_lag, "block time, s"),
        "",
        f"Throughput: results delivered **{delivered_rate:.2f} jobs/s** ({len(result.available)} results in "
        f"{delivered_s:.0f} s from the first submit until the last result was available); settled "
        f"{len(settled) / result.wall_s:.2f} jobs/s, {items / result.wall_s:.1f} items/s ({result.wall_s:.0f} s "
        f"until all were settled, which includes the last job's {load.challenge_window_s} s challenge window).",
        "",
        f"Renter-visible: funding receipt -> result available p50 **{percentile_or_none(to_result, 50)} s**, "
        f"p99 **{percentile_or_none(to_result, 99)} s**. CPU speed of the moment: the fixed loop "
        f"`sum(range({CPU_LOOP_N:_}))` took {result.cpu_loop_s[0]:.2f} s of CPU before the run and "
        f"{result.cpu_loop_s[1]:.2f} s after it; delivered jobs/s x loop s = **{delivered_rate * loop_s:.2f}** "
        f"(jobs per loop-time: the throughput on a machine where the loop takes 1 s, comparable across machines).",
        "",
        f"Verifier audits (audit coverage): **{len(result.drawn & result.audited)} of {len(result.drawn)} jobs "
        f"drawn for a mandatory audit** were audited (re-executed and reported) inside their challenge windows, "
        f"and {len(result.audited)} of {len(jobs)} jobs in all (the undrawn ones with capacity left over). Each "
        f"job's floor, the least probability at which it is audited so that cheating on it is a loss "
        f"(docs/PROTOCOL.md, \"Audit probability\"): {floor_range(result.floors)}.",
        "",
        f"Where the time goes: funding: all {len(jobs)} jobs were funded in {result.funding_s:.0f} s "
        f"({funding_rate:.2f} jobs/s); a renter waits for each funding receipt before its next job (its wallet "
        f"reads the pending nonce). Providers: a worker runs one job at a time (the model in a child forked from "
        f"a warm sandbox template, the result signed and delivered at once) and a committer thread sends the "
        f"commits and, once the window is over, the finalizations in batches; the {load.providers} providers "
        f"delivered {serving:.2f} results/s from the first result to the last. The slower of the two bounds the "
        f"run: **{'the providers' if serving < funding_rate else 'funding'}**.",
    ]
    lines += ["", f"Result available: {result.available_source or 'not measured'}."]
    if result.cpu is not None:
        lines += ["", *cpu_table(result.cpu, len(settled))]
    problems = result.submit_errors[:5] + [f"job {j} refunded: {why}" for j, why in sorted(result.refunded.items())[:5]]
    if result.unsettled:
        problems.append(f"unsettled jobs: {result.unsettled[:20]}")
    if problems:
        lines += ["", "Failures:", "", *(f"- {p}" for p in problems)]
    lines += ["", "Method: devtools/bench_load.py (PoG once per provider before the run; no mining)."]
    return "\n".join(lines)


def percentile_or_none(values: list[float], p: float) -> str:
    return f"{percentile(values, p):,.1f}" if values else "none"


def floor_range(floors: list[float]) -> str:
    if not floors:
        return "no jobs"
    return f"median {percentile(floors, 50):.3f}, from {min(floors):.3f} to {max(floors):.3f}"


def cpu_table(cpu: CpuUsage, jobs: int) -> list[str]:
    """CPU seconds per settled job by process kind, and the total against what the cores offered."""
    per_job = max(jobs, 1)
    lines = ["| process kind | CPU s | CPU s per job | share |", "| --- | ---: | ---: | ---: |"]
    for name, seconds in sorted(cpu.seconds.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {name} | {seconds:,.1f} | {seconds / per_job:.3f} | {seconds / max(cpu.total, 1e-9):.0%} |")
    lines.append(f"| **all the market's processes** | {cpu.total:,.1f} | {cpu.total / per_job:.3f} | 100% |")
    lines += ["", f"Over the {cpu.wall_s:.0f} s run the market used {cpu.total:,.0f} CPU s of the "
              f"{cpu.wall_s * cpu.cores:,.0f} that {cpu.cores} cores offered ({cpu.utilisation:.0%}); "
              f"the machine as a whole was {cpu.machine_busy:.0%} busy (other work included). At "
              f"{cpu.total / per_job:.2f} CPU s per job these cores cap the market at "
              f"{cpu.cores * per_job / max(cpu.total, 1e-9):.1f} jobs/s."]
    return lines


def load_section(load: Load = Load()) -> str:
    """`unchained bench` section `load`: progress goes to stderr, the market to a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="unchained-load-") as root:
        return section(run(load, Path(root), Console(stderr=True)))
