"""The one transaction sender on a real anvil: nonces under concurrency and after outside use,
fees, reverts decoded by name from several contracts, bounded receipt waits."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3

from client import contracts
from client.errors import NodeUnavailable, TransactionNotMined, TransactionReverted
from client.escrow_jobs import read_job
from client.tx import TxSender, connect
from client.ports import free_port
from protocol.deployments import Deployment
from rpc_proxy import RpcProxy
from unchained_cli.chain import LocalChain, anvil_binary
from unchained_cli.deploy import Deployer, deploy_all

MNEMONIC = "test test test test test test test test test test test junk"
ETH = 10**18
ZERO_ADDRESS = "0x" + "00" * 20


def dev_key(index: int) -> LocalAccount:
    Account.enable_unaudited_hdwallet_features()
    return Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")


@dataclass
class Node:
    chain: LocalChain
    web3: Web3
    deployment: Deployment

    def contract(self, name: str):  # type: ignore[no-untyped-def]
        return contracts.deployed(self.web3, self.deployment, name)


def _node(block_time: float | None) -> Iterator[Node]:
    with LocalChain(port=free_port(), block_time=block_time) as local:
        with local.mining_at_once():
            deployment = deploy_all(Deployer.connect(local.rpc_url))
        yield Node(local, connect(local.rpc_url), deployment)


@pytest.fixture(scope="module")
def instant() -> Iterator[Node]:
    """anvil mining a block per transaction."""
    yield from _node(None)


@pytest.fixture(scope="module")
def one_second() -> Iterator[Node]:
    """anvil mining a block a second: receipts come later than the send returns."""
    yield from _node(1)


@pytest.fixture
def no_mining(instant: Node) -> Iterator[Node]:
    """The node takes transactions but mines none; automine again afterwards."""
    instant.web3.provider.make_request("evm_setAutomine", [False])
    try:
        yield instant
    finally:
        instant.web3.provider.make_request("evm_setAutomine", [True])
        instant.web3.provider.make_request("evm_mine", [])


@pytest.mark.parametrize("node_name", ["instant", "one_second"])
def test_threads_sending_at_once_get_distinct_nonces_and_all_land(node_name: str,
                                                                  request: pytest.FixtureRequest) -> None:
    node: Node = request.getfixturevalue(node_name)
    account = dev_key(1 if node_name == "instant" else 2)
    sender = TxSender(node.web3, account, node.deployment)
    staking = node.contract("Staking")
    start = node.web3.eth.get_transaction_count(account.address)
    receipts, errors = [], []

    def stake_three_times() -> None:
        try:
            for _ in range(3):
                receipts.append(sender.send(staking.functions.stake(), value=1))
        except Exception as exc:  # collected: a thread's exception would otherwise vanish
            errors.append(exc)

    threads = [threading.Thread(target=stake_three_times) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and len(receipts) == 18
    nonces = sorted(node.web3.eth.get_transaction(r["transactionHash"])["nonce"] for r in receipts)
    assert nonces == list(range(start, start + 18))
    assert all(r["status"] == 1 for r in receipts)
    assert staking.functions.stakeOf(account.address).call() >= 18


def test_fees_follow_the_base_fee_as_eip_1559(instant: Node) -> None:
    sender = TxSender(instant.web3, dev_key(3), instant.deployment)
    receipt = sender.send(instant.contract("Staking").functions.stake(), value=1)
    tx = instant.web3.eth.get_transaction(receipt["transactionHash"])
    base = instant.web3.eth.get_block(receipt["blockNumber"])["baseFeePerGas"]
    assert tx["type"] == 2 and tx["maxFeePerGas"] >= base and receipt["effectiveGasPrice"] >= base
    assert receipt["gasUsed"] < tx["gas"]  # the estimate's margin was not all used


def test_nonce_resyncs_after_someone_else_used_the_account(instant: Node) -> None:
    account = dev_key(4)
    ours = TxSender(instant.web3, account, instant.deployment)
    staking = instant.contract("Staking")
    ours.send(staking.functions.stake(), value=1)  # our sender now holds the next nonce locally
    other = TxSender(instant.web3, account, instant.deployment)  # e.g. the same key in another process
    other.send(staking.functions.stake(), value=1)
    other.send(staking.functions.stake(), value=1)
    # The node's pending count is now ahead of the nonce ours holds: it takes the node's.
    receipt = ours.send(staking.functions.stake(), value=1)
    assert receipt["status"] == 1
    assert instant.web3.eth.get_transaction(receipt["transactionHash"])["nonce"] == \
        instant.web3.eth.get_transaction_count(account.address) - 1


def test_reverts_of_different_contracts_decode_to_their_error_name_and_arguments(instant: Node) -> None:
    account = dev_key(5)
    sender = TxSender(instant.web3, account)  # no deployment: the packaged artifacts name the errors
    unknown = (999, ZERO_ADDRESS, ZERO_ADDRESS, ZERO_ADDRESS, 1, b"\0" * 32, 1, b"\0" * 32, 0, b"\0" * 32)  # a Job
    cases = [
        (instant.contract("Staking").functions.requestUnbond(7),
         "StakingInsufficientStake", {"account": account.address, "requested": 7, "bonded": 0}),
        (instant.contract("JobEscrow").functions.cancel(unknown), "JobEscrowUnknownJob", {"jobId": 999}),
        (instant.contract("ProviderRegistry").functions.deactivate(),
         "ProviderRegistryNotRegistered", {"provider": account.address}),
        (instant.contract("ChallengeManager").functions.challengeJob(unknown, 5),
         "ChallengeNotStakedVerifier", {"challenger": account.address, "stake": 0, "required": ETH}),
    ]
    nonce = instant.web3.eth.get_transaction_count(account.address)
    for call, error, args in cases:
        with pytest.raises(TransactionReverted) as raised:
            sender.send(call, what=f"{error} case")
        assert raised.value.error == error and raised.value.error_args == args, raised.value
        assert raised.value.tx_hash is None and f"{error} case would revert: {error}(" in str(raised.value)
    assert instant.web3.eth.get_transaction_count(account.address) == nonce  # nothing was sent


def test_a_revert_mined_after_a_passing_estimate_is_decoded_from_its_replay(no_mining: Node) -> None:
    """A commitResult estimated before the job's deadline is mined after it: the receipt's status 0
    is explained by the custom error its replay raises."""
    node = no_mining
    provider, renter = dev_key(6), dev_key(8)
    as_provider = TxSender(node.web3, provider, node.deployment)
    as_renter = TxSender(node.web3, renter, node.deployment)
    escrow = node.contract("JobEscrow")
    node.web3.provider.make_request("evm_setAutomine", [True])
    as_provider.send(node.contract("Staking").functions.stake(), value=ETH)
    as_provider.send(node.contract("ProviderRegistry").functions.register(
        b"CPU".ljust(32, b"\0"), [Web3.keccak(text="replay-gpu")], 10**15, 10**12, "meta://replay"))
    deadline = node.web3.eth.get_block("latest")["timestamp"] + 600
    as_renter.send(escrow.functions.createJob(provider.address, b"\x11" * 32, 10**15, deadline), value=10**15)
    job_id = escrow.functions.jobCount().call()
    node.web3.provider.make_request("evm_setAutomine", [False])
    job = read_job(escrow, job_id).as_tuple()
    accept = as_provider.broadcast(escrow.functions.commitResult(job, b"\x22" * 32, 1, b"\x33" * 32))  # estimated in time
    node.web3.provider.make_request("evm_increaseTime", [3600])
    node.web3.provider.make_request("evm_mine", [])
    with pytest.raises(TransactionReverted) as raised:
        as_provider.mined(accept, "commitResult")
    assert raised.value.error == "JobEscrowDeadlinePassed" and raised.value.error_args == {"jobId": job_id,
                                                                                          "deadline": deadline}
    assert raised.value.tx_hash == "0x" + bytes(accept).hex() and "commitResult reverted: JobEscrowDeadlinePassed(" in \
        str(raised.value)


def test_a_receipt_never_mined_times_out_naming_the_transaction(no_mining: Node) -> None:
    node = no_mining
    sender = TxSender(node.web3, dev_key(7), node.deployment, receipt_timeout_s=1.0)
    with pytest.raises(TransactionNotMined, match=r"stake: tx 0x[0-9a-f]{64} was sent but not mined within 1s") as raised:
        sender.send(node.contract("Staking").functions.stake(), value=1)
    assert isinstance(raised.value, NodeUnavailable)  # transient: what services retry
    node.web3.provider.make_request("evm_mine", [])
    assert sender.mined(raised.value.tx_hash, "stake")["status"] == 1  # it was sent, and lands once mined
    # The nonce it took stays taken: the next send follows it.
    node.web3.provider.make_request("evm_setAutomine", [True])
    assert sender.send(node.contract("Staking").functions.stake(), value=1)["status"] == 1


def test_no_node_is_one_error_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(NodeUnavailable, match=f"no JSON-RPC node answers at {url}"):
        connect(url, timeout_s=2)


def test_a_node_without_base_fee_gets_a_legacy_gas_price() -> None:
    """anvil at the Berlin hardfork has no base fee: the sender prices by gasPrice (type 0)."""
    port = free_port()
    anvil = subprocess.Popen([anvil_binary(), "--port", str(port), "--hardfork", "berlin"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                web3 = connect(f"http://127.0.0.1:{port}", timeout_s=2)
                break
            except NodeUnavailable:
                assert time.monotonic() < deadline, "anvil did not start"
                time.sleep(0.05)
        assert web3.eth.get_block("latest").get("baseFeePerGas") is None
        # A call to an account without code succeeds: enough to price and mine one transaction
        # (the project's contracts target a later EVM than Berlin).
        ping = contracts.bind(web3, dev_key(9).address, [
            {"type": "function", "name": "ping", "inputs": [], "outputs": [], "stateMutability": "nonpayable"}])
        receipt = TxSender(web3, dev_key(1)).send(ping.functions.ping())
        tx = web3.eth.get_transaction(receipt["transactionHash"])
        assert receipt["status"] == 1 and tx["type"] == 0 and tx["gasPrice"] > 0 and "maxFeePerGas" not in tx
    finally:
        anvil.terminate()
        anvil.wait(timeout=10)


def test_contract_reads_ask_the_node_its_chain_id_once_not_per_call(instant: Node) -> None:
    # web3's validation middleware checks the chain id before every eth_call: uncached, each
    # read is two round trips to the node.
    with RpcProxy(instant.chain.rpc_url) as proxy:
        web3 = connect(proxy.url)
        found = instant.deployment.contract("Staking")
        staking = contracts.bind(web3, found.address, found.abi)
        proxy.reset()
        for _ in range(5):
            staking.functions.stakeOf(dev_key(0).address).call()
        assert proxy.calls["eth_call"] == 5
        assert proxy.calls["eth_chainId"] <= 1


def test_a_transactions_reads_go_to_the_node_in_one_round_trip(instant: Node) -> None:
    """The estimate, the pending count and the fees: one HTTP request before the send."""
    with RpcProxy(instant.chain.rpc_url) as proxy:
        web3 = connect(proxy.url)
        staking = contracts.bind(web3, instant.deployment.contract("Staking").address,
                                 instant.deployment.contract("Staking").abi)
        sender = TxSender(web3, dev_key(2), instant.deployment)
        sender.send(staking.functions.stake(), value=1)  # the chain id, asked once per connection
        proxy.reset()
        posts = proxy.posts
        with pytest.raises(TransactionReverted, match="StakingInsufficientStake"):  # the estimate's error, decoded
            sender.broadcast(staking.functions.requestUnbond(10**30))
        assert proxy.posts - posts == 1
        receipt = sender.send(staking.functions.stake(), value=1)
        assert receipt["status"] == 1
        assert all(proxy.calls[m] == 2 for m in ("eth_estimateGas", "eth_getTransactionCount",
                                                   "eth_getBlockByNumber", "eth_maxPriorityFeePerGas"))
        assert proxy.calls["eth_sendRawTransaction"] == 1


@pytest.mark.parametrize("node", [{"refuse_batches": True},
                                  {"unknown_methods": frozenset({"eth_maxPriorityFeePerGas"})}],
                         ids=["no-batches", "no-priority-fee-method"])
def test_a_node_without_batches_or_the_priority_fee_method_still_gets_eip_1559_transactions(
        instant: Node, node: dict) -> None:  # type: ignore[type-arg]
    with RpcProxy(instant.chain.rpc_url, **node) as proxy:
        web3 = connect(proxy.url)
        found = instant.deployment.contract("Staking")
        staking = contracts.bind(web3, found.address, found.abi)
        receipt = TxSender(web3, dev_key(2), instant.deployment).send(staking.functions.stake(), value=1)
        tx = instant.web3.eth.get_transaction(receipt["transactionHash"])
        assert receipt["status"] == 1 and tx["type"] == 2 and tx["maxPriorityFeePerGas"] >= 0
        if node.get("refuse_batches"):
            assert proxy.calls["eth_estimateGas"] == 1  # asked on its own after the batch was refused
