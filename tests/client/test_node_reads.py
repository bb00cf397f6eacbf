"""client.node_reads: what `unchained balance` and `lease list` read without web3 is what web3
reads (views, a balance, the clock, logs across many ranges and batches); a node that does not
answer is one sentence."""

from __future__ import annotations

import pytest

from client import node_reads
from client.errors import NodeUnavailable
from client.node_reads import NodeReader, View, event_topic, open_reader
from devtools.session import ChainSession


@pytest.fixture(scope="module")
def session(shared_chain) -> ChainSession:  # type: ignore[no-untyped-def]
    return ChainSession.connect(shared_chain.local.rpc_url, shared_chain.deployment)


def test_views_balance_and_clock_read_as_web3_reads_them(session: ChainSession, shared_chain) -> None:  # type: ignore[no-untyped-def]
    reader, deployment = open_reader(shared_chain.local.rpc_url, shared_chain.deployment_file)
    assert deployment == shared_chain.deployment
    staking = session.contract("Staking")
    account = session.accounts[7]
    session.send(staking.functions.stake(), account, value=3 * 10**18)
    session.send(staking.functions.requestUnbond(10**18), account)
    found = deployment.contract("Staking")
    stake_of, unbonding_of = View(found.address, found.abi, "stakeOf"), View(found.address, found.abi, "unbondingOf")
    stake, unbonding, balance = reader.batch([stake_of.request(account), unbonding_of.request(account),
                                              ("eth_getBalance", [account, "latest"])])
    assert stake_of.decode(stake) == staking.functions.stakeOf(account).call()
    expected = staking.functions.unbondingOf(account).call()
    assert unbonding_of.decode(unbonding) == {"amount": expected.amount, "releaseAt": expected.releaseAt}
    assert int(balance, 16) == session.web3.eth.get_balance(account)
    assert reader.timestamp() == session.web3.eth.get_block("latest")["timestamp"]


def test_logs_over_many_ranges_and_batches(session: ChainSession, shared_chain, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(node_reads, "LOG_RANGE", 1)  # one request per block: several batches of 50
    session.mine(2 * node_reads.BATCH_READS + 1)
    session.send(session.contract("Staking").functions.stake(), session.accounts[8], value=10**18)
    reader = NodeReader(shared_chain.local.rpc_url)
    staking = shared_chain.deployment.contract("Staking")
    topic = event_topic(staking.abi, "Staked")
    logs = reader.logs(staking.address, [[topic]], staking.block)
    expected = session.web3.eth.get_logs({"address": staking.address, "topics": [topic], "fromBlock": staking.block})
    assert session.web3.eth.block_number - staking.block > 2 * node_reads.BATCH_READS
    assert [(int(x["blockNumber"], 16), x["data"]) for x in logs] == \
        [(x["blockNumber"], "0x" + bytes(x["data"]).hex()) for x in expected] and logs


def test_a_node_that_does_not_answer_is_one_sentence() -> None:
    with pytest.raises(NodeUnavailable, match=r"^no JSON-RPC node answers at http://127.0.0.1:1 \(ConnectionError\): "
                                              r"start one \(`unchained up`\) or pass --rpc URL$"):
        NodeReader("http://127.0.0.1:1").timestamp()
