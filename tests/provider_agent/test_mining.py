"""Mining: real SHA-256d (checked with hashlib), and the policy: the miner pauses when a job
arrives, stays paused while it runs, and resumes after the cooldown once it ends.

Every wait here is for a condition with a bound, never for a fixed time, so the tests pass on a
machine under load (where a batch of hashes takes longer); only the checks that something does
NOT happen (no hashing while paused) watch for a span of time."""

from __future__ import annotations

import hashlib
import os
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from provider_agent.agent import Agent
from provider_agent.mining import MiningPolicy, MiningSupervisor, ReferenceMiner
from provider_agent.sha256d import digest_bytes, hash_nonces, meets
from tests.support.models import save_torchscript
from tests.support.waiting import holds_for, wait_until
from tests.tiny_models import Slow


def _reference(header76: bytes, nonce: int) -> bytes:
    return hashlib.sha256(hashlib.sha256(header76 + struct.pack("<I", nonce)).digest()).digest()


def test_torch_sha256d_equals_hashlib():
    header = os.urandom(76)
    nonces = torch.tensor([0, 1, 2**31, 2**32 - 1, 123456789], dtype=torch.int64)
    words = hash_nonces(header, nonces)
    for row, nonce in zip(words, nonces.tolist()):
        assert digest_bytes(row) == _reference(header, nonce)


def test_difficulty_check_agrees_with_the_little_endian_target():
    header = os.urandom(76)
    nonces = torch.arange(4096, dtype=torch.int64)
    hits = meets(hash_nonces(header, nonces), 6)
    for nonce, hit in zip(nonces.tolist(), hits.tolist()):
        assert hit == (int.from_bytes(_reference(header, nonce), "little") < 2 ** 250)
    assert 20 < int(hits.sum()) < 150  # about 4096 / 64


def test_reference_miner_finds_real_shares_and_reports_hashrate():
    miner = ReferenceMiner(difficulty_bits=10, batch=4096)
    miner.start()
    try:
        # 32 shares expected in 8 batches at 1 in 1024: the bounds below fail by chance < 1e-6.
        wait_until(lambda: miner.hashes >= 4096 * 8, 120, "8 batches hashed")
        assert miner.hashrate() > 0
    finally:
        miner.stop()
    assert miner.shares
    for share in miner.shares:
        assert int.from_bytes(_reference(share.header76, share.nonce), "little") < 2 ** 246
    assert miner.hashes / 2**10 / 4 < len(miner.shares) < miner.hashes / 2**10 * 4


def test_pause_returns_within_one_batch_and_stops_hashing():
    miner = ReferenceMiner(batch=4096)
    miner.start()
    try:
        started = time.monotonic()
        wait_until(lambda: miner.hashes >= 4096 * 4, 60, "4 batches hashed")
        batch_s = (time.monotonic() - started) / (miner.hashes // 4096)
        before = miner.hashes
        with ThreadPoolExecutor(1) as pool:  # the bound only keeps a pause that never returns from hanging
            latency = pool.submit(miner.pause).result(timeout=60)
        count = miner.hashes
        # Counted in hashes, not seconds: the batch in flight (and one that ended as pause was called).
        assert count - before <= 2 * 4096 and latency > 0, (count - before, latency)
        holds_for(lambda: miner.hashes == count, max(0.3, 3 * batch_s), "no hashing while paused")
        miner.resume()
        wait_until(lambda: miner.hashes > count, 60, "hashing again after resume")
    finally:
        miner.stop()


def test_supervisor_cooldown_keeps_a_burst_of_jobs_from_flapping():
    miner = ReferenceMiner(batch=2048)
    supervisor = MiningSupervisor(miner, MiningPolicy(cooldown_s=2.0))
    supervisor.start()
    try:
        for job in range(5):  # each job starts well inside the cooldown after the last one
            supervisor.job_started(job)
            supervisor.job_finished(job, 1, 0.01)
            holds_for(lambda: supervisor.state == "paused", 0.05, "paused between the jobs of a burst")
        assert supervisor.state == "paused" and len(supervisor.telemetry.switches) == 1
        wait_until(lambda: supervisor.state == "mining", 30, "mining resumed after the cooldown")
    finally:
        supervisor.stop()


def test_mining_pauses_when_a_job_arrives_and_resumes_after_it(settings_for, market):
    agent = Agent.build(settings_for(mining=True, mining_batch=4096, mining_resume_after_s=1.0))
    agent.register()
    agent.mining.start()
    try:
        wait_until(lambda: agent.mining.state == "mining" and agent.mining.miner.hashrate() > 0, 60,
                   "mining with a measured hash rate")
        content = agent.settings.content_dir
        items = [np.ones(8, np.float32)] * 8
        job_id, _ = market.create_job(content, save_torchscript(Slow(20_000), content), items)
        done = threading.Event()
        threading.Thread(target=lambda: (agent.jobs.process(market.dispatched(job_id)), done.set()),
                         daemon=True).start()
        wait_until(lambda: agent.mining.state == "paused", 30, "the miner paused for the job")
        before = agent.mining.miner.hashes
        # Nothing hashed for as long as the job runs (the miner resumes only a cooldown after it).
        deadline = time.monotonic() + 120
        while not done.wait(0.02):
            assert agent.mining.miner.hashes == before, "the miner hashed while the job ran"
            assert time.monotonic() < deadline, "the job did not finish"
        assert agent.jobs.store.get(job_id).status == "signed"
        wait_until(lambda: agent.mining.state == "mining" and agent.mining.miner.hashrate() > 0, 60,
                   "mining resumed after the cooldown, its hash rate measured again")
        assert agent.mining.miner.hashes > before
        assert len(agent.mining.telemetry.switches) == 1  # one pause for the job (its time: test above)
        floor = agent.publish_yield()
        assert floor > 0 and "miningYieldWeiPerGpuHour" in agent.chain.provider_info()["metadata_uri"]
    finally:
        agent.mining.stop()


def test_leased_gpus_stop_mining_until_the_lease_ends(settings_for, market):
    agent = Agent.build(settings_for(mining=True, mining_batch=4096, mining_resume_after_s=0.2))
    agent.register()
    s, leases = market.session, market.session.contract("LeaseManager")
    agent.mining.start()
    try:
        cost = leases.functions.leaseCost(market.provider, 1, 3600).call()
        s.send(leases.functions.startLease(market.provider, 1, 3600), market.renter, value=cost)
        lease_id = leases.functions.leaseCount().call()
        assert agent.chain.lease(lease_id)["active"]
        agent.mining.lease_started()
        assert agent.mining.state == "leased"
        hashes = agent.mining.miner.hashes
        agent.mining.job_started(99)  # a job during the lease does not bring the miner back after it
        agent.mining.job_finished(99, 1, 0.1)
        holds_for(lambda: agent.mining.state == "leased" and agent.mining.miner.hashes == hashes, 0.5,
                  "leased GPUs stay unmined")

        s.send(leases.functions.endLease(lease_id), market.renter)
        assert not agent.chain.lease(lease_id)["active"]
        agent.mining.lease_ended()
        wait_until(lambda: agent.mining.state == "mining" and agent.mining.miner.hashes > hashes, 60,
                   "mining resumed after the lease")
    finally:
        agent.mining.stop()
