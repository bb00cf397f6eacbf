"""Every party on a node that produces no block on its own (anvil mining only on transactions,
or not at all): nothing hangs and nothing fails silently. Waits are bounded and say what is
wrong: a transaction not mined in time names itself, and the backend's indexer says why its
confirmations never come. (No party waits for a block that only a transaction creates: a PoG
seed comes from the request block's own hash.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from web3 import Web3

from backend.chain import Chain
from backend.db import make_engine, migrate, session_factory
from backend.indexer import Indexer
from backend.settings import Settings as BackendSettings
from renter.wallet import Wallet
from client.errors import ClientError, TransactionNotMined
from protocol.deployments import Deployment
from provider_agent.chain import ProviderChain
from tests.support.chain import SharedChains
from unchained_cli.chain import LocalChain
from devtools.market import ETH, dev_account, wait_for
from devtools.session import ChainSession

pytestmark = pytest.mark.e2e


@dataclass
class Node:
    chain: LocalChain
    deployment: Deployment
    deployment_file: Path
    session: ChainSession


@pytest.fixture(scope="module")
def node(chains: SharedChains) -> Node:
    """anvil that mines a block per transaction and none otherwise (what `chain up --block-time 0`
    runs): the session's instant chain, as just deployed."""
    shared = chains.get()
    return Node(shared.local, shared.deployment, shared.deployment_file,
                ChainSession.connect(shared.rpc_url, shared.deployment))


@pytest.fixture
def no_mining(node: Node) -> Iterator[None]:
    """The node accepts transactions but mines none (a stalled chain); automine again afterwards."""
    node.session.web3.provider.make_request("evm_setAutomine", [False])
    try:
        yield
    finally:
        node.session.web3.provider.make_request("evm_setAutomine", [True])
        node.session.mine()  # whatever was left pending


def test_indexer_says_why_confirmations_never_come_on_a_chain_that_mines_only_on_transactions(
        node: Node, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = BackendSettings(data_dir=tmp_path, rpc_url=node.chain.rpc_url, deployment_file=node.deployment_file,
                               confirmations=2, dispatch=False, run_indexer=False)
    engine = make_engine(settings.db_url)
    migrate(engine)
    indexer = Indexer(Chain.connect(settings), session_factory(engine), settings.confirmations,
                      stall_warning_s=0.5)
    staking = node.session.contract("Staking")
    node.session.send(staking.functions.stake(), node.session.accounts[7], value=ETH)  # the last block: never confirmed
    head = node.session.web3.eth.block_number
    caplog.set_level(logging.WARNING, logger="backend.indexer")

    def warned() -> bool:
        indexer.sync()
        return any("no new block" in r.getMessage() for r in caplog.records)

    assert wait_for(warned, 10, 0.2), "the indexer waited for confirmations silently"
    [warning] = [r.getMessage() for r in caplog.records if "no new block" in r.getMessage()]
    assert f"..{head} wait for 2 confirmations" in warning and "block time" in warning
    assert indexer.cursor() == head - 2
    for _ in range(5):  # once per stall, not once per poll
        indexer.sync()
    assert sum("no new block" in r.getMessage() for r in caplog.records) == 1
    engine.dispose()


def test_renter_transaction_never_mined_is_one_error_naming_it(node: Node, no_mining: None) -> None:
    wallet = Wallet(node.chain.rpc_url, dev_account(6), node.deployment_file)
    wallet.sender.receipt_timeout_s = 1.0
    with pytest.raises(TransactionNotMined, match=r"stake: tx 0x[0-9a-f]{64} was sent but not mined within 1s"):
        wallet.send(wallet.contract("Staking").functions.stake(), value=ETH)


def test_provider_transaction_never_mined_raises_a_client_error(node: Node, no_mining: None) -> None:
    provider = ProviderChain(Web3(Web3.HTTPProvider(node.chain.rpc_url)), dev_account(5), node.deployment)
    provider.sender.receipt_timeout_s = 1.0
    with pytest.raises(TransactionNotMined, match=r"stake 1 wei: tx 0x[0-9a-f]{64} was sent but not mined within 1s") as raised:
        provider.stake(1)
    assert isinstance(raised.value, ClientError)  # what the agent's callers handle
