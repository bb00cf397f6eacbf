"""The chain indexer against anvil: confirmations, resume, idempotence, rebuild from events."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import backend_support as scenario
import pytest
from backend_support import make_settings, private_schema
from sqlalchemy import Engine, delete, func, select

from backend import models as m
from backend.chain import Chain
from backend.db import make_engine, migrate, session_factory
from backend.indexer import Indexer, rebuild
from client.new_heads import Head, NewHeads, websocket_url
from client.ports import free_port
from unchained_cli.chain import LocalChain
from unchained_cli.deploy import Deployer, deploy_all, write_deployment
from devtools.session import ChainSession
from tests.support.waiting import wait_until


def _indexer(chain, tmp_path, url: str = "", confirmations: int = 0) -> tuple[Engine, Indexer]:  # type: ignore[no-untyped-def]
    settings = make_settings(chain, tmp_path, url, confirmations=confirmations)
    engine = make_engine(settings.db_url)
    migrate(engine)
    return engine, Indexer(Chain.connect(settings), session_factory(engine), settings.confirmations,
                           batch_blocks=7)


def snapshot(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    """Every chain table's rows, without surrogate keys, in a stable order."""
    out = {}
    with session_factory(engine)() as session:
        for model in m.CHAIN_TABLES:
            columns = [c.name for c in model.__table__.columns if c.name != "id"]  # type: ignore[attr-defined]
            rows = [{c: getattr(row, c) for c in columns} for row in session.scalars(select(model))]
            out[model.__tablename__] = sorted(rows, key=repr)
    return out


def test_projections_follow_the_market(chain, market, tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine, indexer = _indexer(chain, tmp_path)
    assert indexer.sync() > 20
    with session_factory(engine)() as s:
        a = s.get(m.Provider, market.provider.lower())
        b = s.get(m.Provider, market.provider2.lower())
        assert (a.gpu_model, a.gpu_count, a.price_per_gpu_hour) == ("H100-SXM", 1, 9 * 10**15)
        assert (a.gpu_class, a.tflops_milli, a.pog_passed) == ("H100-SXM", 710_000, True)
        assert (b.gpu_count, b.pog_passed, b.gpu_class) == (2, False, None)
        assert a.jobs_finalized == 1
        jobs = {j.job_id: j for j in s.scalars(select(m.Job))}
        assert jobs[1].status == "finalized" and jobs[1].item_count == 5
        assert jobs[1].provider_amount + jobs[1].fee == jobs[1].price
        assert jobs[2].status == "refunded" and jobs[2].refund == jobs[2].price
        lease = s.get(m.Lease, 1)
        assert lease.status == "ended" and lease.provider_earned + lease.renter_refund == lease.paid
        rounds = s.scalars(select(m.PogRound).order_by(m.PogRound.round_id)).all()
        assert [r.status for r in rounds] == ["attested"] * 3 and [r.passed for r in rounds] == [True, False, True]
        challenge = s.get(m.Challenge, 1)
        assert challenge.kind == "pog" and challenge.randomness is not None
        stake = s.get(m.Stake, market.provider2.lower())
        assert (stake.bonded, stake.unbonding) == (4 * scenario.ETH, scenario.ETH)
        disputed = jobs[3]
        assert disputed.status == "refunded" and disputed.refund == disputed.price and not disputed.frozen
        dispute = s.scalars(select(m.Dispute)).one()
        assert dispute.verdict == "provider_at_fault" and dispute.weight_provider_at_fault == 4 * scenario.ETH
        job_challenge = s.scalars(select(m.Challenge).where(m.Challenge.kind == "job")).one()
        assert (job_challenge.status, job_challenge.dispute_id) == ("provider_faulted", dispute.dispute_id)
        assert (a.challenges_lost, s.get(m.Stake, market.provider.lower()).slashed) == (1, scenario.ETH)
        withdrawn = s.scalars(select(m.Payment).where(m.Payment.kind == "withdrawn")).all()
        assert {p.account for p in withdrawn} == {market.provider.lower(), market.renter.lower()}


def test_events_within_the_confirmation_depth_wait(chain, session, market, tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine, indexer = _indexer(chain, tmp_path, confirmations=3)
    indexer.sync()
    registry = session.contract("ProviderRegistry")
    session.send(registry.functions.setMetadataURI("meta://new"), market.provider)
    indexer.sync()
    with session_factory(engine)() as s:
        assert s.get(m.Provider, market.provider.lower()).metadata_uri == "meta://a"
    session.mine(3)
    indexer.sync()
    with session_factory(engine)() as s:
        assert s.get(m.Provider, market.provider.lower()).metadata_uri == "meta://new"
    session.send(registry.functions.setMetadataURI("meta://a"), market.provider)


def test_restart_resumes_from_cursor_and_replay_is_idempotent(chain, session, market, tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine, indexer = _indexer(chain, tmp_path)
    first = indexer.sync()
    before = snapshot(engine)
    # A new indexer on the same database (a restart) finds nothing new.
    _, restarted = _indexer(chain, tmp_path)
    assert restarted.sync() == 0
    # A crash that lost the cursor but kept the rows: re-reading every block applies nothing twice.
    with session_factory(engine).begin() as s:
        s.execute(delete(m.IndexerCursor))
    _, restarted = _indexer(chain, tmp_path)  # after the crash: an indexer keeps its cursor in memory
    assert restarted.sync() == 0
    assert snapshot(engine) == before
    with session_factory(engine)() as s:
        assert s.scalar(select(func.count()).select_from(m.ChainEvent)) == first


def test_a_pushed_block_is_indexed_from_its_header_and_anything_else_is_left_to_the_full_pass(
        chain, session, market, tmp_path) -> None:  # type: ignore[no-untyped-def]
    local, _, _ = chain
    engine, indexer = _indexer(chain, tmp_path)
    indexer.sync()
    registry = session.contract("ProviderRegistry")

    def uri() -> str:
        with session_factory(engine)() as s:
            return s.get(m.Provider, market.provider.lower()).metadata_uri

    def no_reads(*_: object) -> None:
        raise AssertionError("the pushed path read the head or a block hash")

    heads = NewHeads(websocket_url(local.rpc_url))
    try:
        wait_until(heads.connected.is_set, 10, "the node pushes new heads")
        heads.take()
        ranged = indexer.follower.target, indexer.follower._block_hash
        indexer.follower.target = indexer.follower._block_hash = no_reads  # type: ignore[method-assign]
        # The block the node pushes is applied from its own header: its logs by its hash, nothing else.
        session.send(registry.functions.setMetadataURI("meta://pushed"), market.provider)
        pushed = wait_until(heads.take, 10, "the node pushes the new block")
        indexer.remember(pushed)
        assert indexer.sync_pushed() == 1 and uri() == "meta://pushed"
        assert indexer.cursor() == pushed[-1].number

        # A missed push (a block between the cursor and the pushed one): left to the full pass.
        session.send(registry.functions.setMetadataURI("meta://missed"), market.provider)
        wait_until(heads.take, 10, "the node pushes the block")  # taken and dropped: missed
        session.mine(1)
        indexer.remember(wait_until(heads.take, 10, "the node pushes the next block"))
        assert indexer.sync_pushed() is None and uri() == "meta://pushed"
        indexer.follower.target, indexer.follower._block_hash = ranged  # type: ignore[method-assign]
        assert indexer.sync() == 1 and uri() == "meta://missed"

        # A pushed block on another parent than the cursor's block (a fork): left to the full pass.
        cursor = indexer.store.load()
        assert cursor is not None
        indexer.remember([Head(cursor.block + 1, "0x" + "11" * 32, "0x" + "22" * 32)])
        assert indexer.sync_pushed() is None and indexer.cursor() == cursor.block
    finally:
        heads.close()
        session.send(registry.functions.setMetadataURI("meta://a"), market.provider)
        engine.dispose()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_rebuild_from_events_alone_gives_the_same_state(chain, market, tmp_path, request, database) -> None:  # type: ignore[no-untyped-def]
    url = request.getfixturevalue("pg_url") if database == "postgresql" else ""
    engine, indexer = _indexer(chain, tmp_path, url)
    indexer.sync()
    before = snapshot(engine)
    assert before["jobs"] and before["providers"] and before["payments"]
    rebuild(indexer)
    assert snapshot(engine) == before
    # And a brand-new database indexed from the chain agrees too.
    with private_schema() if url else nullcontext("") as fresh_url:
        fresh_engine, fresh = _indexer(chain, tmp_path / "fresh", fresh_url)
        fresh.sync()
        assert snapshot(fresh_engine) == before
        fresh_engine.dispose()
    engine.dispose()


def test_a_reorg_deeper_than_the_confirmations_is_detected_and_rebuilt(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Its own chain: it forks with evm_revert, and the module's shared chain carries the market.
    with LocalChain(port=free_port()) as local:
        deployment = deploy_all(Deployer.connect(local.rpc_url))
        path = write_deployment(deployment, tmp_path)
        s = ChainSession.connect(local.rpc_url, deployment)
        p = scenario.parties(s)
        scenario.stake_and_register(s, p)
        registry = s.contract("ProviderRegistry")
        engine, indexer = _indexer((local, deployment, path), tmp_path, confirmations=1)
        snapshot = s.web3.provider.make_request("evm_snapshot", [])["result"]
        s.send(registry.functions.setMetadataURI("meta://fork-a"), p.provider)
        s.mine(3)
        indexer.sync()
        with session_factory(engine)() as db:
            assert db.get(m.Provider, p.provider.lower()).metadata_uri == "meta://fork-a"
        # The fork-a blocks are replaced by a longer chain where the provider did something else.
        s.web3.provider.make_request("evm_revert", [snapshot])
        s.send(registry.functions.setMetadataURI("meta://fork-b"), p.provider)
        s.mine(6)
        indexer.sync()
        with session_factory(engine)() as db:
            assert db.get(m.Provider, p.provider.lower()).metadata_uri == "meta://fork-b"
            uris = [e.args["newURI"] for e in db.scalars(select(m.ChainEvent).where(
                m.ChainEvent.event == "MetadataURIUpdated"))]
            assert uris == ["meta://fork-b"]
        engine.dispose()
