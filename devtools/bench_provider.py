"""Provider benchmarks: dispatch overhead and co-location of mining with jobs on this machine.

Run by `unchained bench` (sections `dispatch` and `colocation`).

Dispatch: a Celery round trip to the worker's ping task against a no-op job through the market
(the renter funds the job on anvil, the provider's worker runs an identity model over one item in
a child of its warm sandbox and replies), both through the same private Redis and worker process,
both signed and checked both ways as every task is (client.task_auth): each span runs from
sending the task to holding the worker's checked reply, which for a job comes as soon as the
worker has its result (on a flow that commits before replying, the commit is in the span).
Co-location: the reference miner and a compute-bound job model, each alone and then together
under the policies (yield, co-run at full and reduced duty).
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import provider_agent  # noqa: F401  first: OMP wait policy
import numpy as np
import torch
from eth_account import Account

from protocol.jobs import JobSpec, encode_output
from client.broker import party_celery
from client.sandbox import close_idle
from client.task_auth import TaskAuth, domain_of
from client.ports import free_port
from protocol.broker import provider_keyprefix
from protocol.ids import JobId
from protocol.escrow_job import EscrowJob
from protocol.tasks import TASK_RUN_JOB, provider_queue
from protocol.ids import Wei
from provider_agent.cache import DirectorySource
from devtools.colocation import under_policies
from provider_agent.mining import ReferenceMiner
from provider_agent.runner import Limits, run_inference
from provider_agent.settings import Settings
from provider_agent.worker import TASK_PING
from unchained_cli.chain import LocalChain
from unchained_cli.deploy import Deployer, deploy_all, write_deployment
from devtools.session import ChainSession

REPO = Path(__file__).resolve().parents[1]
KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"  # anvil account 1
DISPATCH_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"  # anvil account 0, the deployer


class Identity(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Mlp(torch.nn.Module):
    """Compute-bound: three 512-wide layers; one item is a 64x512 activation block."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.layers(x)).mean(dim=1)


def _script(module: torch.nn.Module, directory: Path) -> str:
    path = directory / "m.pt"
    torch.jit.save(torch.jit.script(module), str(path))
    return DirectorySource(directory).put(path.read_bytes())


def dispatch(rounds: int, gap_s: float) -> dict:
    """Medians over `rounds` jobs arriving `gap_s` apart (0: back to back), each after 5 pings."""
    with tempfile.TemporaryDirectory(prefix="bench-provider-") as work:
        return _dispatch(Path(work), rounds, gap_s)


def _dispatch(work: Path, rounds: int, gap_s: float) -> dict:
    content = work / "content"
    content.mkdir()
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL)
    broker = f"redis://127.0.0.1:{port}/0"
    with LocalChain(port=free_port()) as chain:
        deployment = deploy_all(Deployer.connect(chain.rpc_url))
        write_deployment(deployment, work / "deployments")
        s = ChainSession.connect(chain.rpc_url, deployment)
        provider, renter = s.accounts[1], s.accounts[3]
        keystore = work / "key.json"
        keystore.write_text(json.dumps(Account.encrypt(KEY, "pw", kdf="scrypt", iterations=1 << 10)))
        (work / "password").write_text("pw\n")
        settings = Settings(rpc_url=chain.rpc_url, keystore=keystore, password_file=work / "password",
                            deployments_dir=work / "deployments", content_dir=content, data_dir=work / "data",
                            broker_url=broker, mining=False, job_memory_bytes=3 << 30)
        from provider_agent.agent import Agent

        Agent.build(settings).register()
        close_idle()  # the warm model sandbox the agent started here: the worker runs the jobs, with its own
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.update({f"UNCHAINED_PROVIDER_{k.upper()}": str(v) for k, v in settings.model_dump().items() if v is not None})
        queue = provider_queue(provider)
        worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "provider_agent.worker:app", "worker",
                                   "-Q", queue, "-P", "solo", "--without-gossip", "--without-mingle",
                                   "--without-heartbeat", "-l", "warning"], cwd=REPO, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # A ping may come from the provider itself only, a job from the dispatch key only.
        senders = []
        for key in (KEY, DISPATCH_KEY):
            auth = TaskAuth(domain_of(deployment), Account.from_key(key))
            senders.append((auth, party_celery(
                "bench", broker, provider_keyprefix(provider), lambda a=auth: a,
                # Results still referenced when Redis stops would otherwise retry 20 times, 1 s apart.
                result_backend_transport_options={"retry_policy": {"max_retries": 1, "interval_start": 0}})))

        def round_trip(name: str, args: list) -> tuple[float, float, object]:
            """(start, end, the worker's opened reply) of one task, sent and answered."""
            auth, client = senders[1] if name == TASK_RUN_JOB else senders[0]
            start = time.perf_counter()
            sent = client.send_task(name, args=args, queue=queue)
            reply = auth.open_reply(sent.id, sent.get(timeout=120), [provider])
            end = time.perf_counter()
            sent.forget()
            return start, end, reply

        try:
            round_trip(TASK_PING, [])  # worker up
            model = _script(Identity(), content)
            escrow = s.contract("JobEscrow")
            pings, fund, market = [], [], []
            for i in range(rounds + 1):  # the first job caches the model and spec: not counted
                time.sleep(gap_s)  # jobs arrive apart (gap 0: back to back)
                # Pings arrive as the jobs do, right before each: both spans see the same load.
                for _ in range(5):
                    start, end, reply = round_trip(TASK_PING, [])
                    assert reply == "pong", reply
                    if i:
                        pings.append(end - start)
                item = DirectorySource(content).put(encode_output(np.full(4, i, np.float32)))
                spec = JobSpec(model=model, model_format="torchscript", inputs=(item,), batch_size=1,
                               tolerance_ppm=0, deadline=s.now() + 3600, price_wei=10**15, provider=provider)
                spec_hash = bytes.fromhex(DirectorySource(content).put(spec.canonical())[2:])
                t = time.perf_counter()
                s.send(escrow.functions.createJob(provider, spec_hash, 10**15, spec.deadline), renter, value=10**15)
                job_id = escrow.functions.jobCount().call()
                funded = time.perf_counter() - t
                job = EscrowJob(JobId(job_id), renter, provider, "0x" + "00" * 20, Wei(10**15), spec_hash,
                                spec.deadline)
                start, end, result = round_trip(TASK_RUN_JOB, [job.to_json()])
                assert isinstance(result, dict) and result.get("job_id") == job_id and "error" not in result, result
                if i:
                    fund.append(funded)
                    market.append(end - start)
        finally:
            # Replies held in reference cycles would unsubscribe when collected, after Redis stops:
            # each would log a lost connection and a retry failure.
            gc.collect()
            for _, client in senders:
                client.close()
            worker.terminate()
            worker.wait()
            redis.terminate()
            redis.wait()
    ping_ms = statistics.median(pings) * 1e3
    market_ms = statistics.median(market) * 1e3
    return {"ping_round_trip_ms": round(ping_ms, 2), "market_noop_job_ms": round(market_ms, 1),
            "ratio": round(market_ms / ping_ms, 1), "renter_funding_tx_ms": round(statistics.median(fund) * 1e3, 1),
            "rounds": rounds, "gap_between_jobs_s": gap_s,
            "each_job_ms": [round(m * 1e3, 1) for m in market], "each_ping_ms": [round(p * 1e3, 2) for p in pings]}


def _job_throughput(model_path: Path, inputs: list[Path]) -> float:
    run = run_inference(0, model_path, "torchscript", inputs, 8, Limits(3 << 30, 600.0, 1))
    return len(run.outputs) / run.seconds


def colocation(items: int, seconds: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-coloc-") as work:
        return _colocation(Path(work), items, seconds)


def _colocation(work: Path, items: int, seconds: float) -> dict:
    torch.set_num_threads(1)
    model = work / _script(Mlp(), work)
    rng = np.random.default_rng(0)
    inputs = [work / DirectorySource(work).put(encode_output(rng.standard_normal((64, 512)).astype(np.float32)))
              for _ in range(items)]
    _job_throughput(model, inputs[:8])

    miner = ReferenceMiner(batch=1 << 13)
    miner.start()
    time.sleep(seconds)
    solo_hashes = miner.hashrate()
    miner.pause()
    solo_job = _job_throughput(model, inputs)
    results = {"hashrate_solo_hps": round(solo_hashes), "job_solo_items_per_s": round(solo_job, 2)}

    results.update(under_policies(miner, lambda: _job_throughput(model, inputs), items, solo_hashes, solo_job))
    miner.stop()
    return results
