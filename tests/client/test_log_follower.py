"""The shared log follower against real anvil, instant and with a block a second: the cursor
survives a restart (no duplicate, no gap), ranges a node refuses are split, confirmations hold,
events arrive in (block, log index) order, reorgs are handled, and a tick costs the same RPC
calls however long the chain grows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rpc_proxy import RpcProxy
from web3 import Web3

from client.log_follower import (DEFAULT_MAX_RANGE, Batch, Cursor, DeepReorg, Event, LogFollower, LogFollowerError,
                                 MemoryCursorStore, _plain)
from client.watched_ids import SqliteCursorStore, WatchedIds, open_state
from client.ports import free_port
from protocol.deployments import Deployment
from unchained_cli.chain import LocalChain
from unchained_cli.deploy import Deployer, deploy_all
from devtools.market import wait_for
from devtools.session import ChainSession
from verifier.chain import VerifierChain
from verifier.watch import watch_chain

STAKED = {"Staking": ["Staked"]}


@pytest.fixture(scope="module", params=["instant", "block-time-1"])
def chain(request: pytest.FixtureRequest) -> Iterator[tuple[ChainSession, str]]:
    block_time = 1 if request.param == "block-time-1" else None
    with LocalChain(port=free_port(), block_time=block_time) as local:
        deployment = deploy_all(Deployer.connect(local.rpc_url))
        yield ChainSession.connect(local.rpc_url, deployment), request.param


def stake(s: ChainSession, account: int, wei: int = 1) -> None:
    s.send(s.contract("Staking").functions.stake(), s.accounts[account], value=wei)


def follower(web3: Web3, deployment: Deployment, store, only=STAKED, **options) -> LogFollower:  # type: ignore[no-untyped-def]
    return LogFollower.for_deployment(web3, deployment, store, only, **options)


def everything(s: ChainSession, only=STAKED) -> list[Event]:  # type: ignore[no-untyped-def]
    """A reference read: one follower from the deployment block to the head."""
    got: list[Event] = []
    follower(s.web3, s.deployment, MemoryCursorStore(), only).poll(lambda b: got.extend(b.events))
    return got


def key(e: Event) -> tuple[int, int]:
    return e.block_number, e.log_index


def test_restart_resumes_after_the_last_handled_batch_with_no_duplicate_and_no_gap(chain, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    s, _ = chain
    for account in range(1, 7):
        stake(s, account)
    path = tmp_path / "state.sqlite"
    first = follower(s.web3, s.deployment, SqliteCursorStore(open_state(path), "stakes"), max_range=3)
    handled: list[Event] = []

    def crash_on_second_batch_with_events(batch: Batch) -> None:
        if batch.events and handled:
            raise RuntimeError("killed while processing")
        handled.extend(batch.events)

    with pytest.raises(RuntimeError):
        first.poll(crash_on_second_batch_with_events)
    assert handled
    stake(s, 7)  # more events arrive while the process is down
    restarted = follower(s.web3, s.deployment, SqliteCursorStore(open_state(path), "stakes"), max_range=3)
    restarted.poll(lambda batch: handled.extend(batch.events))
    assert restarted.poll(lambda batch: handled.extend(batch.events)) == 0
    expected = everything(s)
    assert [key(e) for e in handled] == [key(e) for e in expected]  # each once, none missing, in order
    assert handled[-1].args["account"] == s.accounts[7].lower()


def test_a_range_the_node_refuses_is_split_until_it_is_served(chain) -> None:  # type: ignore[no-untyped-def]
    s, _ = chain
    stake(s, 2)
    expected = everything(s, None)
    with RpcProxy(s.web3.provider.endpoint_uri, max_log_range=5) as proxy:  # type: ignore[attr-defined]
        web3 = Web3(Web3.HTTPProvider(proxy.url))
        got: list[Event] = []
        limited = follower(web3, s.deployment, MemoryCursorStore(), None, max_range=2000)
        limited.poll(lambda b: got.extend(b.events))
        assert proxy.refused >= 1 and max(proxy.log_ranges) <= 5
        assert limited.reader.max_range <= 5  # kept: the next polls ask for a served range at once
    assert [key(e) for e in got] == [key(e) for e in expected]
    assert {e.contract for e in got} >= {"Staking", "ProviderRegistry", "JobEscrow"}  # the deployment's own events


def test_a_node_that_refuses_even_one_block_is_a_clear_error(chain) -> None:  # type: ignore[no-untyped-def]
    s, _ = chain
    with RpcProxy(s.web3.provider.endpoint_uri, max_log_range=0) as proxy:  # type: ignore[attr-defined]
        web3 = Web3(Web3.HTTPProvider(proxy.url))
        with pytest.raises(LogFollowerError, match="even for block"):
            follower(web3, s.deployment, MemoryCursorStore()).poll(lambda b: None)


def test_events_wait_for_their_confirmations(chain) -> None:  # type: ignore[no-untyped-def]
    s, mode = chain
    confirmed = follower(s.web3, s.deployment, MemoryCursorStore(), confirmations=3)
    got: list[Event] = []

    def handle(batch: Batch) -> None:
        assert confirmed.head is not None and batch.cursor.block <= confirmed.head - 3
        got.extend(batch.events)

    def delivered() -> bool:
        return any(e.args["amount"] == 779 for e in got)

    stake(s, 3, 779)
    block = s.web3.eth.block_number
    if mode == "instant":  # the head stands still: nothing is confirmed until blocks come
        confirmed.poll(handle)
        s.web3.provider.make_request("anvil_mine", [2])
        confirmed.poll(handle)
        assert not delivered()
        s.web3.provider.make_request("anvil_mine", [1])
    assert wait_for(lambda: confirmed.poll(handle) >= 0 and delivered(), timeout=20, interval=0.1)
    [event] = [e for e in got if e.args["amount"] == 779]
    assert event.block_number == block and event.args["account"] == s.accounts[3].lower()


def test_events_of_one_block_come_in_log_index_order(chain) -> None:  # type: ignore[no-untyped-def]
    s, mode = chain
    if mode != "instant":
        pytest.skip("automine is switched off only on the instant chain")
    start = s.web3.eth.block_number + 1
    staking = s.contract("Staking")
    s.web3.provider.make_request("evm_setAutomine", [False])
    try:
        for account in (5, 4, 6):
            staking.functions.stake().transact({"from": s.accounts[account], "value": 1, "gas": 200_000})
        s.web3.provider.make_request("evm_mine", [])
    finally:
        s.web3.provider.make_request("evm_setAutomine", [True])
    got: list[Event] = []
    follower(s.web3, s.deployment, MemoryCursorStore(), max_range=1).poll(lambda b: got.extend(b.events))
    same_block = [e for e in got if e.block_number == start]
    assert sorted(e.args["account"] for e in same_block) == sorted(s.accounts[a].lower() for a in (5, 4, 6))
    assert [key(e) for e in got] == sorted(set(key(e) for e in got))  # ordered, each once


def test_a_reorg_shallower_than_the_confirmations_never_reaches_the_handler(chain) -> None:  # type: ignore[no-untyped-def]
    s, mode = chain
    if mode != "instant":
        pytest.skip("a reorg is made with evm_snapshot/evm_revert on the instant chain")
    store = MemoryCursorStore()
    confirmed = follower(s.web3, s.deployment, store, confirmations=2)
    got: list[Event] = []
    confirmed.poll(lambda b: got.extend(b.events))
    snapshot = s.web3.provider.make_request("evm_snapshot", [])["result"]
    stake(s, 8)  # fork A: one block, unconfirmed
    confirmed.poll(lambda b: got.extend(b.events))
    s.web3.provider.make_request("evm_revert", [snapshot])
    stake(s, 9)  # fork B replaces it
    s.web3.provider.make_request("anvil_mine", [3])
    confirmed.poll(lambda b: got.extend(b.events))
    accounts = [e.args["account"] for e in got]
    assert s.accounts[9].lower() in accounts and s.accounts[8].lower() not in accounts


def test_a_reorg_deeper_than_the_confirmations_is_raised_and_watched_ids_are_read_again(chain, tmp_path) -> None:  # type: ignore[no-untyped-def]
    s, mode = chain
    if mode != "instant":
        pytest.skip("a reorg is made with evm_snapshot/evm_revert on the instant chain")
    marked = (777, 778)  # the stakes of fork A and fork B, told apart by their amounts
    snapshot = s.web3.provider.make_request("evm_snapshot", [])["result"]
    stake(s, 1, marked[0])
    bare = follower(s.web3, s.deployment, MemoryCursorStore())
    bare.poll(lambda b: None)
    watched = WatchedIds(s.web3, s.deployment, open_state(tmp_path / "ids.sqlite"), "stakes", STAKED,
                         lambda e: ("stake", e.args["amount"]) if e.args["amount"] in marked else None)
    watched.refresh()
    assert watched.ids("stake") == [777]
    s.web3.provider.make_request("evm_revert", [snapshot])
    stake(s, 1, marked[1])
    s.web3.provider.make_request("anvil_mine", [2])
    with pytest.raises(DeepReorg):
        bare.poll(lambda b: None)
    watched.refresh()
    assert watched.ids("stake") == [778]


def tick_cost(proxy: RpcProxy, tick, s: ChainSession) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(calls of an idle tick, calls of a tick after one new block with an event)."""
    tick()  # settle whatever came before
    proxy.reset()
    tick()
    idle = proxy.total()
    stake(s, 4)
    proxy.reset()
    tick()
    return idle, proxy.total()


def test_rpc_calls_per_tick_stay_constant_as_the_chain_grows(chain, tmp_path) -> None:  # type: ignore[no-untyped-def]
    s, mode = chain
    if mode != "instant":
        pytest.skip("counted on the instant chain, where nothing moves between the counts")
    with RpcProxy(s.web3.provider.endpoint_uri) as proxy:  # type: ignore[attr-defined]
        web3 = Web3(Web3.HTTPProvider(proxy.url))
        store = SqliteCursorStore(open_state(tmp_path / "cursor.sqlite"), "all")
        every = follower(web3, s.deployment, store, None, max_range=500)
        verifier = VerifierChain.connect(proxy.url, s.deployment, unlocked_sender=s.accounts[9])
        watch = watch_chain(verifier, tmp_path / "verifier.sqlite")

        def tick() -> None:
            every.poll(lambda b: None)
            watch.refresh()

        s.web3.provider.make_request("anvil_mine", [10])
        short = tick_cost(proxy, tick, s)
        ranges_short = list(proxy.log_ranges)
        s.web3.provider.make_request("anvil_mine", [2000])
        tick()  # catches up in bounded ranges (500 blocks, the watch's default 2000)
        assert max(proxy.log_ranges) <= DEFAULT_MAX_RANGE
        long = tick_cost(proxy, tick, s)
        ranges_long = list(proxy.log_ranges)
    print(f"\nRPC calls per tick (follower + verifier watch): idle {short[0]} -> {long[0]}, "
          f"one new block {short[1]} -> {long[1]}; blocks per getLogs {ranges_short} -> {ranges_long}")
    assert long == short
    assert ranges_long == ranges_short == [1, 1]  # only the new block, whatever the chain's length


def test_a_cursor_beyond_the_head_is_a_replaced_chain(chain) -> None:  # type: ignore[no-untyped-def]
    s, _ = chain
    head = s.web3.eth.block_number
    ahead = MemoryCursorStore(Cursor(head + 100, "0x" + "11" * 32))  # saved on a longer, older chain
    with pytest.raises(DeepReorg):
        follower(s.web3, s.deployment, ahead).poll(lambda b: None)


def test_watched_ids_survive_a_restart_and_a_restart_reads_only_new_blocks(chain, tmp_path) -> None:  # type: ignore[no-untyped-def]
    s, _ = chain
    path = tmp_path / "state.sqlite"

    def watch(web3: Web3) -> WatchedIds:
        return WatchedIds(web3, s.deployment, open_state(path), "stakers", STAKED, lambda e: ("staker", e.args["account"]))

    stake(s, 5)
    first = watch(s.web3)
    first.refresh()
    known = first.ids("staker")
    assert s.accounts[5].lower() in known
    handled = first.follower.position()
    stake(s, 6)
    with RpcProxy(s.web3.provider.endpoint_uri) as proxy:  # type: ignore[attr-defined]
        restarted = watch(Web3(Web3.HTTPProvider(proxy.url)))
        restarted.refresh()
        # From the saved cursor, not from the deployment: exactly the blocks that came since.
        assert sum(proxy.log_ranges) == restarted.follower.position() - handled
    assert restarted.ids("staker") == sorted(set(known) | {s.accounts[6].lower()})
    restarted.forget("staker", [s.accounts[6].lower()])
    assert s.accounts[6].lower() not in watch(s.web3).ids("staker")  # forgetting is kept too


def test_logs_are_decoded_as_web3_decodes_them(chain) -> None:  # type: ignore[no-untyped-def]
    """The follower decodes the node's JSON itself: every event of a deployment with strings,
    byte strings, arrays, addresses and numbers comes out as web3's own decoding, made plain."""
    s, _ = chain
    provider, renter = s.accounts[8], s.accounts[9]
    stake(s, 8, 10**18)
    registry, escrow = s.contract("ProviderRegistry"), s.contract("JobEscrow")
    if not registry.functions.isRegistered(provider).call():
        s.send(registry.functions.register(b"CPU".ljust(32, b"\0"), [b"\x01" * 32, b"\x02" * 32], 10**16, 10**12,
                                           "ipfs://provider-ünïcode"), provider)
    s.send(registry.functions.setMetadataURI("https://example.org/a"), provider)
    s.send(escrow.functions.createJob(provider, b"\x11" * 32, 10**15, s.now() + 3600), renter, value=10**15)
    ours = everything(s, None)
    raw = s.web3.eth.get_logs({"fromBlock": min(c.block for c in s.deployment.contracts.values()), "toBlock": "latest",
                               "address": [s.contract(n).address for n in s.deployment.contracts]})
    by_address = {s.contract(n).address.lower(): n for n in s.deployment.contracts}
    expected = []
    for log in raw:
        contract = s.contract(by_address[log["address"].lower()])
        for event in contract.events:
            try:
                decoded = event.process_log(log)
            except Exception:  # noqa: BLE001 - another event of this contract
                continue
            addresses = {i["name"] for i in event.abi["inputs"] if i["type"] in ("address", "address[]")}
            expected.append((by_address[log["address"].lower()], decoded["event"],
                             {k: _plain(v, k in addresses) for k, v in decoded["args"].items()},
                             log["blockNumber"], "0x" + bytes(log["transactionHash"]).hex(), log["logIndex"]))
            break
    got = [(e.contract, e.name, e.args, e.block_number, e.tx_hash, e.log_index) for e in ours]
    assert got == expected
    names = {name for _, name, *_ in got}
    assert {"Staked", "ProviderRegistered", "MetadataURIUpdated", "JobCreated"} <= names, names
    assert any(e.args.get("oldURI") == "ipfs://provider-ünïcode" for e in ours)
