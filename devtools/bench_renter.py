"""Renter-visible latency: a no-op job from the renter's funding send to its signed result readable
through the backend's API, beside a bare Celery ping and the worker's signed ping on the same broker.

The dispatch bench (bench_provider.dispatch) starts its span when the task leaves for the worker; a
renter also waits for its funding transaction, the backend's indexer to see JobCreated, the
dispatch, and the backend to store the provider's signed result. This bench times all of it.

The whole market runs as in the load bench (devtools/market.py: anvil, a private Redis with a
user per party, the backend, one provider agent without mining). A verifier passes the provider's
Proof of GPU (quotes need it) and is then stopped: it audits after the result, off the renter's
path. Then, `jobs` times, `gap_s` apart plus a random part of a block time (so that on a chain with
blocks the sends fall at every phase of the block, not at one the bench's own rhythm locks onto), a
first job, which caches the model, not counted:

- 5 bare pings: an unsigned no-op task to a plain Celery worker (devtools/bench_ping.py) on
  the market's Redis: the floor of any Celery round trip there;
- 5 signed pings: the provider's TASK_PING through its own queue to the worker that runs the jobs,
  signed with the provider's key and its signed reply checked (client.task_auth);
- one job of one item: the input and the spec are uploaded first (not timed); the clock runs from
  the renter's createJob send (sign, send, receipt) until GET /jobs/{id}/result?wait=S (a long
  poll: answered when the backend stores the result; `long_poll=False`: a plain GET every POLL_S)
  shows the provider's signed result. Its signature is checked after the clock stops.

With `keep_logs` the market's logs are copied there before it stops, and `timeline` reads from them
where each job's time went (devtools.renter_timeline: indexed, dispatched, run, signed, stored).
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from celery import Celery
from rich.console import Console
from web3 import Web3

from renter.client import BackendClient
from renter.wallet import Wallet
from client import blocks
from client.broker import party_celery
from client.contracts import emitted
from client.keepalive import http_client
from client.keystore import load_keystore
from client.task_auth import TaskAuth, domain_of
from protocol.broker import provider_keyprefix
from protocol.escrow_job import EscrowJob
from protocol.jobs import JobSpec
from protocol.tasks import provider_queue
from provider_agent.worker import TASK_PING
from devtools import bench_ping
from devtools.bench_load import job_inputs, percentile, tiny_model, wait_pog
from devtools.renter_timeline import Sent, table, timelines
from devtools.market import ETH, REPO_ROOT, LocalMarket, MarketError, MarketPlan, ProviderPlan, dev_account

POLL_S = 0.005  # the renter's look at its result: up to this much late
PINGS = 5  # of each kind, right before each job
MAX_PRICE_WEI = ETH // 20


@dataclass(frozen=True)
class Latency:
    chain: str  # how the chain mines
    renter_ms: list[float]  # funding send -> signed result readable
    funding_ms: list[float]  # funding send -> receipt
    indexed_ms: list[float]  # funding send -> the backend shows the job (JobCreated indexed); polls only
    signed_ping_ms: list[float]
    bare_ping_ms: list[float]
    sent: list[Sent]  # each timed job's id, funding transaction and send time (renter_timeline)


def plan(block_time: float | None) -> MarketPlan:
    """One provider (anvil key 1, no mining), one verifier (2) for its PoG, one renter (3);
    `block_time` None: each transaction mined at once, else a block every `block_time` s."""
    base = MarketPlan(providers=(ProviderPlan("provider-1", 1, mining=False),), verifiers=(2,), renters=(3,),
                      pog_interval_s=3600.0)
    return base if block_time is None else replace(base, block_time=block_time, instant=False)


def measure(block_time: float | None, jobs: int = 20, gap_s: float = 0.5, console: Console | None = None,
            on_ready: Callable[[LocalMarket], object] = lambda _: None, long_poll: bool = True,
            keep_logs: Path | None = None) -> Latency:
    """`on_ready` is called once the market runs, before the first job (a profiler attaches there);
    `long_poll` False: the renter polls its result every POLL_S (the way before long polls, and the
    only one that sees when the job is indexed); `keep_logs`: a directory the market's logs are
    copied to before it stops (for `timeline`)."""
    console = console or Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="bench-renter-") as root:
        market = LocalMarket(plan(block_time), Path(root))
        try:
            market.start(console.log)
            provider = market.providers()[0]
            wait_pog(market, [provider])
            market.services["verifier-1"].stop()
            with Pingers(market, Path(root)) as pingers, Renter(market, long_poll) as renter:
                renter.job()  # caches the model at the provider, warms every connection
                on_ready(market)
                renter_ms, funding_ms, indexed_ms, signed, bare, sent = [], [], [], [], [], []
                phase = random.Random(0)
                for i in range(jobs):
                    time.sleep(gap_s + phase.uniform(0, block_time or 0))
                    bare += [pingers.bare() for _ in range(PINGS)]
                    signed += [pingers.signed() for _ in range(PINGS)]
                    job, indexed = renter.job()
                    total, funding = job.readable_ms, job.receipt_ms
                    sent.append(job)
                    renter_ms.append(total)
                    funding_ms.append(funding)
                    if indexed is not None:
                        indexed_ms.append(indexed)
                    console.log(f"job {i + 1}/{jobs}: {total:.1f} ms (funding {funding:.1f} ms"
                                + (f", indexed {indexed:.1f} ms)" if indexed is not None else ")"))
        finally:
            if keep_logs is not None:
                shutil.copytree(market.root / "logs", keep_logs, dirs_exist_ok=True)
            market.stop()
    chain = "instant (each transaction mined at once)" if block_time is None else f"a block every {block_time:g} s"
    return Latency(chain, renter_ms, funding_ms, indexed_ms, signed, bare, sent)


def timeline(latency: Latency, log_dir: Path) -> str:
    """Where each job's time went, from the logs `measure(..., keep_logs=log_dir)` kept."""
    return table(timelines(latency.sent, log_dir))


class Pingers:
    """The bench's two Celery round trips on the market's broker (as its admin user)."""

    def __init__(self, market: LocalMarket, root: Path) -> None:
        assert market.deployment is not None
        url = market.broker.url
        self.provider = market.providers()[0].address
        self.auth = TaskAuth(domain_of(market.deployment), dev_account(market.plan.providers[0].account))
        self.signed_app = party_celery(
            "bench-renter", url, provider_keyprefix(self.provider), lambda: self.auth,
            # Results still referenced when Redis stops would otherwise retry 20 times, 1 s apart.
            result_backend_transport_options={"retry_policy": {"max_retries": 1, "interval_start": 0}})
        self.bare_app = Celery("bench-bare-client", broker=url, backend=url)
        self.bare_app.conf.result_backend_transport_options = {"retry_policy": {"max_retries": 1, "interval_start": 0}}
        env = {**os.environ, "BENCH_BROKER_URL": url, "PYTHONPATH": str(REPO_ROOT)}
        with open(root / "bare-worker.log", "ab") as log:
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "devtools.bench_ping:app", "worker", "-Q", bench_ping.QUEUE,
                 "-P", "solo", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"],
                cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def __enter__(self) -> Pingers:
        self.bare(timeout=60)  # the workers are up
        self.signed(timeout=60)
        return self

    def __exit__(self, *exc: object) -> None:
        # Replies held in reference cycles would unsubscribe when collected, after Redis stops:
        # each would log a lost connection and a retry failure.
        gc.collect()
        self.signed_app.close()
        self.bare_app.close()
        self.worker.terminate()
        self.worker.wait(15)

    def bare(self, timeout: float = 30) -> float:
        start = time.perf_counter()
        sent = self.bare_app.send_task(bench_ping.TASK, queue=bench_ping.QUEUE)
        reply = sent.get(timeout=timeout)
        elapsed = time.perf_counter() - start
        sent.forget()
        if reply != "pong":
            raise MarketError(f"bare ping answered {reply!r}")
        return elapsed * 1e3

    def signed(self, timeout: float = 30) -> float:
        start = time.perf_counter()
        sent = self.signed_app.send_task(TASK_PING, args=[], queue=provider_queue(self.provider))
        reply = self.auth.open_reply(sent.id, sent.get(timeout=timeout), [self.provider])
        elapsed = time.perf_counter() - start
        sent.forget()
        if reply != "pong":
            raise MarketError(f"signed ping answered {reply!r}")
        return elapsed * 1e3


class Renter:
    """The market's renter: funds one-item jobs at the provider and waits for each signed result."""

    def __init__(self, market: LocalMarket, long_poll: bool = True) -> None:
        self.long_poll = long_poll  # GET /jobs/{id}/result?wait=S, else a plain GET every POLL_S
        party = market.renters()[0]
        self.provider = market.providers()[0].address
        account = load_keystore(party.keystore, market.password_file)
        self.client = BackendClient.connect(market.backend_url, account)
        self.wallet = Wallet(market.chain.rpc_url, account, market.deployment_file)
        self.http = http_client(market.backend_url, timeout=10)  # the renter's unsigned reads
        self.escrow = self.wallet.contract("JobEscrow")
        self.count = 0

    def __enter__(self) -> Renter:
        self.model = self.client.push_model(tiny_model(), "latency.pt", "torchscript", private=False)["content_hash"]
        quotes = self.client.quotes(model=self.model, items=1, private=False, max_price_wei=str(MAX_PRICE_WEI),
                                    gpu_classes=None)
        match = [q for q in quotes if q["provider"] == self.provider.lower()]
        if not match:
            raise MarketError(f"provider {self.provider} quoted nothing: {quotes}")
        self.price = int(match[0]["price_wei"])
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()
        self.client.close()

    def job(self, timeout: float = 60) -> tuple[Sent, float | None]:
        """One job timed from its funding send (the receipt, the signed result readable), and when
        the backend first showed it (ms after the send; None with long polls)."""
        self.count += 1
        hashes = self.client.upload_inputs(job_inputs(0, self.count, 1))
        deadline = blocks.timestamp(self.wallet.web3) + 3600
        spec = JobSpec(model=self.model, model_format="torchscript", inputs=tuple(hashes), batch_size=1,
                       tolerance_ppm=0, deadline=deadline, price_wei=self.price, provider=self.provider.lower())
        self.client.store_spec(spec.canonical())
        create = self.escrow.functions.createJob(Web3.to_checksum_address(self.provider), spec.spec_hash, self.price,
                                                 deadline)
        sent_at, start = time.time(), time.perf_counter()
        receipt = self.wallet.send(create, value=self.price)
        funded = time.perf_counter()
        job_id = emitted(self.escrow, "JobCreated", receipt)[0]["args"]["jobId"]
        result, indexed = self._signed_result(job_id, start + timeout)
        end = time.perf_counter()
        timed = Sent(job_id, Web3.to_hex(receipt["transactionHash"]), sent_at, (funded - start) * 1e3,
                     (end - start) * 1e3)
        job = EscrowJob.from_created(emitted(self.escrow, "JobCreated", receipt)[0]["args"])
        # raises unless the job's provider (on-chain) signed it
        if self.client.verified_signed_result(job, self.wallet.escrow_domain(), result) is None:
            raise MarketError(f"job {job_id}: no signed result")
        return timed, None if indexed is None else (indexed - start) * 1e3

    def _signed_result(self, job_id: int, until: float) -> tuple[dict[str, Any], float | None]:
        """The result with the provider's signature, and when the backend first knew the job
        (None with long polls: the renter asks once and is answered when the result is stored)."""
        if self.long_poll:
            result = self.client.wait_result(job_id, until - time.perf_counter())
            if result is None or result["signed"] is None:
                raise MarketError(f"job {job_id}: no signed result readable in time")
            return result, None
        indexed = None
        while time.perf_counter() < until:
            response = self.http.get(f"/jobs/{job_id}/result")
            if response.status_code != 404 and indexed is None:
                indexed = time.perf_counter()
            if response.status_code == 200:
                result = response.json()
                if result["signed"] is not None:
                    return result, indexed
            elif response.status_code not in (404, 409):  # JobCreated not indexed yet; no result yet
                response.raise_for_status()
            time.sleep(POLL_S)
        raise MarketError(f"job {job_id}: no signed result readable in time")


def summary(latency: Latency) -> dict[str, Any]:
    def p(values: list[float], q: float) -> float | None:
        return round(percentile(values, q), 1) if values else None

    renter, signed, bare = latency.renter_ms, latency.signed_ping_ms, latency.bare_ping_ms
    return {
        "chain": latency.chain, "jobs": len(renter),
        "renter_p50_ms": p(renter, 50), "renter_p99_ms": p(renter, 99),
        "funding_p50_ms": p(latency.funding_ms, 50), "funding_p99_ms": p(latency.funding_ms, 99),
        "indexed_p50_ms": p(latency.indexed_ms, 50), "indexed_p99_ms": p(latency.indexed_ms, 99),
        "signed_ping_p50_ms": p(signed, 50), "signed_ping_p99_ms": p(signed, 99),
        "bare_ping_p50_ms": p(bare, 50), "bare_ping_p99_ms": p(bare, 99),
        "renter_over_signed_ping_p50": round(percentile(renter, 50) / percentile(signed, 50), 1),
        "renter_over_bare_ping_p50": round(percentile(renter, 50) / percentile(bare, 50), 1),
    }
