"""Mining: real SHA-256d (checked with hashlib), and the policy: the miner pauses when a job
arrives, stays paused while it runs, and resumes after the cooldown once it ends."""

from __future__ import annotations

import hashlib
import os
import struct
import threading
import time

import numpy as np
import torch

from provider_agent.agent import Agent
from provider_agent.chain import JobStatus
from provider_agent.mining import MiningPolicy, MiningSupervisor, ReferenceMiner
from provider_agent.sha256d import digest_bytes, hash_nonces, meets
from tests.provider_agent.conftest import save_torchscript
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
    time.sleep(1.5)
    miner.stop()
    assert miner.hashes >= 4096 * 2 and miner.shares
    for share in miner.shares:
        assert int.from_bytes(_reference(share.header76, share.nonce), "little") < 2 ** 246
    assert miner.hashes / 2**10 / 4 < len(miner.shares) < miner.hashes / 2**10 * 4


def test_pause_returns_within_one_batch_and_stops_hashing():
    miner = ReferenceMiner(batch=4096)
    miner.start()
    time.sleep(0.5)
    latency = miner.pause()
    count = miner.hashes
    time.sleep(0.3)
    assert miner.hashes == count and latency < 1.0
    miner.resume()
    time.sleep(0.3)
    assert miner.hashes > count
    miner.stop()


def test_supervisor_cooldown_keeps_a_burst_of_jobs_from_flapping():
    miner = ReferenceMiner(batch=2048)
    supervisor = MiningSupervisor(miner, MiningPolicy(cooldown_s=0.5))
    supervisor.start()
    for job in range(5):
        supervisor.job_started(job)
        supervisor.job_finished(job, 1, 0.01)
        time.sleep(0.05)
    assert supervisor.state == "paused" and len(supervisor.telemetry.switches) == 1
    time.sleep(0.8)
    assert supervisor.state == "mining"
    supervisor.stop()


def test_mining_pauses_when_a_job_arrives_and_resumes_after_it(settings_for, market):
    agent = Agent.build(settings_for(mining=True, mining_batch=4096, mining_resume_after_s=0.5))
    agent.register()
    agent.mining.start()
    try:
        time.sleep(0.8)
        assert agent.mining.state == "mining" and agent.mining.miner.hashrate() > 0
        content = agent.settings.content_dir
        items = [np.ones(8, np.float32)] * 8
        job_id, _ = market.create_job(content, save_torchscript(Slow(20_000), content), items)
        done = threading.Event()
        threading.Thread(target=lambda: (agent.jobs.process(job_id), done.set()), daemon=True).start()
        deadline = time.monotonic() + 30
        while agent.mining.state != "paused" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert agent.mining.state == "paused"
        before = agent.mining.miner.hashes
        time.sleep(0.5)
        assert not done.is_set(), "the job should still be running"
        assert agent.mining.miner.hashes == before  # nothing hashed while the job ran
        assert done.wait(60)
        assert agent.chain.job(job_id).status == JobStatus.COMMITTED
        time.sleep(1.0)
        assert agent.mining.state == "mining" and agent.mining.miner.hashes > before
        assert agent.mining.telemetry.switches[0] < 1.0
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
        time.sleep(0.5)
        assert agent.mining.state == "leased" and agent.mining.miner.hashes == hashes

        s.send(leases.functions.endLease(lease_id), market.renter)
        assert not agent.chain.lease(lease_id)["active"]
        agent.mining.lease_ended()
        time.sleep(0.6)
        assert agent.mining.state == "mining" and agent.mining.miner.hashes > hashes
    finally:
        agent.mining.stop()
