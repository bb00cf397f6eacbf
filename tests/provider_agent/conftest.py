"""Shared fixtures: one anvil with the contract set per test module, a provider keystore, a
renter acting through anvil's unlocked account, and tiny models built here (never downloaded)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded
import numpy as np
import pytest
import torch
from eth_account import Account


from protocol.jobs import JobSpec, encode_output
from provider_agent.cache import content_hash
from provider_agent.settings import Settings
from unchained_cli.chain import LocalChain, free_port
from unchained_cli.deploy import Deployer, deploy_all, write_deployment
from unchained_cli.session import ChainSession

# anvil's default mnemonic, account 1: development only.
PROVIDER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
PASSWORD = "provider-test-password"
ETH = 10**18
REPO = Path(__file__).resolve().parents[2]


def save_torchscript(module: torch.nn.Module, directory: Path) -> str:
    path = directory / "model.pt"
    torch.jit.save(torch.jit.script(module), str(path))
    return put(directory, path.read_bytes())


def save_onnx(module: torch.nn.Module, directory: Path) -> str:
    path = directory / "model.onnx"
    torch.onnx.export(module, (torch.zeros(2, 8),), str(path), dynamo=False, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return put(directory, path.read_bytes())


def put(directory: Path, data: bytes) -> str:
    name = content_hash(data)
    (directory / name).write_bytes(data)
    return name


@dataclass
class Market:
    chain: LocalChain
    session: ChainSession
    deployments_dir: Path
    provider: str
    renter: str
    verifier: str

    def create_job(self, content: Path, model: str, items: list[np.ndarray], *, fmt: str = "torchscript",
                   deadline_in: int = 3600, price: int = ETH // 20, spec_bytes: bytes | None = None) -> tuple[int, JobSpec]:
        inputs = tuple(put(content, encode_output(x)) for x in items)
        spec = JobSpec(model=model, model_format=fmt, inputs=inputs, batch_size=4, tolerance_ppm=0,
                       deadline=self.session.now() + deadline_in, price_wei=price, provider=self.provider)
        raw = spec_bytes if spec_bytes is not None else spec.canonical()
        spec_hash = bytes.fromhex(put(content, raw)[2:])
        escrow = self.session.contract("JobEscrow")
        self.session.send(escrow.functions.createJob(self.provider, spec_hash, price, spec.deadline),
                          self.renter, value=price)
        return escrow.functions.jobCount().call(), spec


@pytest.fixture(scope="module")
def market(tmp_path_factory) -> Market:
    deployments_dir = tmp_path_factory.mktemp("deployments")
    with LocalChain(port=free_port()) as chain:
        deployment = deploy_all(Deployer.connect(chain.rpc_url))
        write_deployment(deployment, deployments_dir)
        session = ChainSession.connect(chain.rpc_url, deployment)
        accounts = session.accounts
        assert Account.from_key(PROVIDER_KEY).address == accounts[1]
        yield Market(chain, session, deployments_dir, accounts[1], accounts[3], accounts[4])


@pytest.fixture(scope="module")
def keystore(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "provider.json"
    path.write_text(json.dumps(Account.encrypt(PROVIDER_KEY, PASSWORD, kdf="scrypt", iterations=1 << 10)))
    return path


@pytest.fixture(scope="module")
def password_file(keystore) -> Path:
    """The keystore's password as a file: the only way a service is given one (client.keystore)."""
    path = keystore.parent / "password"
    path.write_text(PASSWORD + "\n")
    return path


@pytest.fixture
def settings_for(market, keystore, password_file, tmp_path):
    def make(**overrides) -> Settings:
        content = tmp_path / "content"
        content.mkdir(exist_ok=True)
        values = dict(rpc_url=market.chain.rpc_url, keystore=keystore, password_file=password_file,
                      deployments_dir=market.deployments_dir, content_dir=content, data_dir=tmp_path / "data",
                      job_memory_bytes=3 << 30, job_timeout_s=30.0, stake_wei=2 * ETH, mining=False)
        values.update(overrides)
        return Settings(**values)
    return make


@pytest.fixture(scope="module")
def redis_url():
    """A private redis-server on a free port (no persistence): no other run sees our keys."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis

    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait()


