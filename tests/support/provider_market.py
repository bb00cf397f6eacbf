"""Fixtures for provider-agent tests: the session chain as just deployed, a provider keystore,
a renter acting through anvil's unlocked account, and the agent's settings over them.
tests/provider_agent/conftest.py offers them to its modules; other directories import them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from eth_account import Account

from protocol.jobs import JobSpec, encode_output
from protocol.escrow_job import EscrowJob
from provider_agent.settings import Settings
from tests.support.accounts import PROVIDER_KEY, write_keystore
from tests.support.chain import SharedChain
from tests.support.models import put
from unchained_cli.chain import LocalChain
from devtools.session import ChainSession

PASSWORD = "provider-test-password"
ETH = 10**18


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

    def dispatched(self, job_id: int) -> EscrowJob:
        """The job as the backend dispatches it: JobCreated's arguments (backend/dispatch.py)."""
        escrow = self.session.contract("JobEscrow")
        [created] = escrow.events.JobCreated().get_logs(from_block=0, argument_filters={"jobId": job_id})
        return EscrowJob.from_created(created.args)


@pytest.fixture(scope="module")
def market(chains) -> Market:  # type: ignore[no-untyped-def]
    """The session's instant chain as just deployed (provider 1, renter 3, verifier 4)."""
    shared: SharedChain = chains.get()
    session = ChainSession.connect(shared.rpc_url, shared.deployment)
    accounts = session.accounts
    assert Account.from_key(PROVIDER_KEY).address == accounts[1]
    return Market(shared.local, session, shared.deployment_file.parent, accounts[1], accounts[3], accounts[4])


@pytest.fixture(scope="module")
def keystore(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_keystore(tmp_path_factory.mktemp("keys") / "provider.json", PROVIDER_KEY, PASSWORD)


@pytest.fixture(scope="module")
def password_file(keystore: Path) -> Path:
    """The keystore's password as a file: the only way a service is given one (client.keystore)."""
    path = keystore.parent / "password"
    path.write_text(PASSWORD + "\n")
    return path


@pytest.fixture
def settings_for(market: Market, keystore: Path, password_file: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    def make(**overrides: object) -> Settings:
        content = tmp_path / "content"
        content.mkdir(exist_ok=True)
        values: dict[str, object] = dict(
            rpc_url=market.chain.rpc_url, keystore=keystore, password_file=password_file,
            deployments_dir=market.deployments_dir, content_dir=content, data_dir=tmp_path / "data",
            job_memory_bytes=3 << 30, job_timeout_s=30.0, stake_wei=2 * ETH, mining=False)
        values.update(overrides)
        return Settings(**values)
    return make
