"""Background mining: the built-in reference miner, external miners, and the per-device policy.

A GPU that mines earns while no job runs; when a job arrives the policy either yields the
device (the miner pauses between two batches, so the switch takes at most one batch) or co-runs
(the miner keeps a duty cycle: it sleeps after each batch so that it runs `co_run_duty` of the
time and the job gets the rest). Resuming waits for a cooldown after the last job ends
(hysteresis: a burst of short jobs does not make the miner flap). Every switch is timed.

The reference miner does real SHA-256d proof of work over a block header at a difficulty
target (provider_agent.sha256d, torch on the device); its hash rate and shares can be
checked with hashlib. External miners implement the same `Miner` protocol through their own
HTTP APIs (provider_agent.miner_apis).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

import torch

from provider_agent import ProviderAgentError
from provider_agent.sha256d import hash_nonces, meets, midstate

logger = logging.getLogger(__name__)


class MiningError(ProviderAgentError):
    """A miner could not be started, paused or resumed."""


class Miner(Protocol):
    name: str

    def start(self) -> None: ...
    def pause(self) -> float: ...  # returns seconds until the device was really free
    def resume(self) -> None: ...
    def stop(self) -> None: ...
    def hashrate(self) -> float: ...  # hashes per second, from the miner's own counter
    def set_duty(self, duty: float) -> None: ...  # fraction of time to mine (co-running)


@dataclass(frozen=True)
class Share:
    nonce: int
    header76: bytes
    found_at: float


class ReferenceMiner:
    """SHA-256d over one header's nonce space, batch by batch, in a thread."""

    name = "reference-sha256d"

    def __init__(self, device: str = "cpu", difficulty_bits: int = 16, batch: int = 1 << 14,
                 header76: bytes | None = None, window_s: float = 5.0) -> None:
        self.device = device
        self.difficulty_bits = difficulty_bits
        self.batch = batch
        self.header76 = header76 or os.urandom(76)
        self.window_s = window_s
        self.shares: list[Share] = []
        self.hashes = 0
        self._mid = midstate(self.header76)
        self._next_nonce = 0
        self._duty = 1.0
        self._running = threading.Event()  # set: mining; clear: paused
        self._idle = threading.Event()  # set while the loop is not hashing
        self._idle.set()
        self._stop = threading.Event()
        self._samples: deque[tuple[float, int]] = deque()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="reference-miner", daemon=True)
            self._thread.start()
        self._running.set()

    def pause(self) -> float:
        """Stops hashing after the current batch; returns how long that took."""
        t = time.perf_counter()
        self._running.clear()
        self._idle.wait()
        return time.perf_counter() - t

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._running.set()
        if self._thread:
            self._thread.join()
            self._thread = None

    def set_duty(self, duty: float) -> None:
        self._duty = min(1.0, max(0.05, duty))

    def hashrate(self) -> float:
        now = time.monotonic()
        while self._samples and self._samples[0][0] < now - self.window_s:
            self._samples.popleft()
        if len(self._samples) < 2:
            return 0.0
        span = now - self._samples[0][0]
        return sum(n for _, n in list(self._samples)[1:]) / span if span > 0 else 0.0

    def _loop(self) -> None:
        offsets = torch.arange(self.batch, dtype=torch.int64, device=self.device)
        while not self._stop.is_set():
            if not self._running.is_set():
                self._idle.set()
                self._samples.clear()
                self._running.wait()
                continue
            self._idle.clear()
            if not self._running.is_set():  # paused between the check and the clear
                continue
            started = time.perf_counter()
            nonces = (offsets + self._next_nonce) & 0xFFFFFFFF
            words = hash_nonces(self.header76, nonces, self._mid)
            found = nonces[meets(words, self.difficulty_bits)].tolist()
            self._next_nonce += self.batch
            if self._next_nonce > 0xFFFFFFFF:  # nonce space done: a new header (as a new extranonce)
                self.header76, self._next_nonce = os.urandom(76), 0
                self._mid = midstate(self.header76)
            self.hashes += self.batch
            now = time.time()
            self.shares.extend(Share(int(n), self.header76, now) for n in found)
            self._samples.append((time.monotonic(), self.batch))
            if self._duty < 1.0:  # co-running: leave the device to the job for the rest
                self._idle.set()
                time.sleep((time.perf_counter() - started) * (1.0 / self._duty - 1.0))
        self._idle.set()


@dataclass
class MiningPolicy:
    mode: str = "yield"  # "yield": pause while a job runs; "co-run": mine at co_run_duty
    co_run_duty: float = 0.25
    cooldown_s: float = 1.0  # no resume until this long after the last job ended


@dataclass
class Telemetry:
    """Hash rate and job throughput, sampled for /metrics and `provider status`."""

    jobs_done: int = 0
    items_done: int = 0
    job_seconds: float = 0.0
    switches: list[float] = field(default_factory=list)  # pause latencies (s)

    @property
    def items_per_s(self) -> float:
        return self.items_done / self.job_seconds if self.job_seconds else 0.0


class MiningSupervisor:
    """Drives one miner per device from job and lease events, with hysteresis and a cooldown."""

    def __init__(self, miner: Miner, policy: MiningPolicy | None = None) -> None:
        self.miner = miner
        self.policy = policy or MiningPolicy()
        self.telemetry = Telemetry()
        self._active_jobs = 0
        self._leased = False
        self._lock = threading.Lock()
        self._resume_timer: threading.Timer | None = None
        self.state = "stopped"

    def start(self) -> None:
        self.miner.start()
        self.state = "mining"
        logger.info("mining started with %s (policy %s)", self.miner.name, self.policy.mode)

    def stop(self) -> None:
        self._cancel_resume()
        self.miner.stop()
        self.state = "stopped"

    def job_started(self, job_id: int) -> None:
        with self._lock:
            self._active_jobs += 1
            self._cancel_resume()
            if self._leased or self.state == "stopped":
                return
            if self.policy.mode == "co-run":
                self.miner.set_duty(self.policy.co_run_duty)
                self.state = "co-running"
            elif self.state != "paused":
                latency = self.miner.pause()
                self.telemetry.switches.append(latency)
                self.state = "paused"
                logger.info("job %s: miner paused in %.1f ms", job_id, latency * 1e3)

    def job_finished(self, job_id: int, items: int, seconds: float) -> None:
        with self._lock:
            self._active_jobs = max(0, self._active_jobs - 1)
            self.telemetry.jobs_done += 1
            self.telemetry.items_done += items
            self.telemetry.job_seconds += seconds
            if self._active_jobs == 0 and not self._leased and self.state in ("paused", "co-running"):
                self._resume_timer = threading.Timer(self.policy.cooldown_s, self._resume_if_idle)
                self._resume_timer.daemon = True
                self._resume_timer.start()

    def lease_started(self) -> None:
        """The renter gets the GPUs: the miner pauses until the lease ends."""
        with self._lock:
            self._leased = True
            self._cancel_resume()
            if self.state in ("mining", "co-running"):
                self.telemetry.switches.append(self.miner.pause())
            if self.state != "stopped":
                self.state = "leased"

    def lease_ended(self) -> None:
        with self._lock:
            self._leased = False
            if self.state == "leased":
                self.state = "paused"
                if self._active_jobs == 0:
                    self._resume_timer = threading.Timer(self.policy.cooldown_s, self._resume_if_idle)
                    self._resume_timer.daemon = True
                    self._resume_timer.start()

    def _resume_if_idle(self) -> None:
        with self._lock:
            if self._active_jobs or self._leased or self.state == "stopped":
                return
            self.miner.set_duty(1.0)
            self.miner.resume()
            self.state = "mining"
            logger.info("no job for %.1f s: mining resumed", self.policy.cooldown_s)

    def _cancel_resume(self) -> None:
        if self._resume_timer is not None:
            self._resume_timer.cancel()
            self._resume_timer = None


def yield_floor_wei_per_gpu_hour(hashrate: float, wei_per_terahash: int) -> int:
    """What an hour of this device earns by mining: the floor under its price per GPU-hour."""
    return int(hashrate * 3600 / 1e12 * wei_per_terahash)
