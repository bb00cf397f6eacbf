"""ViewCall: a view read without web3's per-call work gives what web3's own call gives, named the
same, alone or in one round trip with other requests; a revert is web3's ContractLogicError."""

from __future__ import annotations

import pytest
from web3.exceptions import ContractLogicError

from client import contracts
from devtools.session import ChainSession


@pytest.fixture(scope="module")
def session(shared_chain) -> ChainSession:  # type: ignore[no-untyped-def]
    return ChainSession.connect(shared_chain.local.rpc_url, shared_chain.deployment)


def test_a_struct_several_outputs_and_an_address_read_as_web3_reads_them(session: ChainSession) -> None:
    staking = session.contract("Staking")
    account = session.accounts[7]
    session.send(staking.functions.stake(), account, value=3 * 10**18)
    session.send(staking.functions.requestUnbond(10**18), account)
    unbonding = contracts.ViewCall(staking, "unbondingOf")(account)
    assert unbonding == staking.functions.unbondingOf(account).call()
    assert unbonding.amount == 10**18 and unbonding.releaseAt > 0
    escrow = session.contract("JobEscrow")
    state = contracts.ViewCall(escrow, "jobState")(1)
    assert state == escrow.functions.jobState(1).call() and state.status == 0 and state.jobHash == b"\0" * 24
    treasury = contracts.ViewCall(escrow, "treasury")()
    assert treasury == escrow.functions.treasury().call() and treasury != treasury.lower()


def test_reads_and_the_latest_block_in_one_round_trip(session: ChainSession) -> None:
    staking = session.contract("Staking")
    stake_of = contracts.ViewCall(staking, "stakeOf")
    accounts = session.accounts[:3]
    *stakes, now = contracts.read_with(session.web3, [*(stake_of.request(a) for a in accounts),
                                                      ("eth_getBlockByNumber", ["latest", False])],
                                       [stake_of.decode] * 3 + [lambda block: int(block["timestamp"], 16)])
    assert stakes == [staking.functions.stakeOf(a).call() for a in accounts]
    assert now == session.web3.eth.get_block("latest")["timestamp"]


def test_a_reverting_view_raises_web3s_error(session: ChainSession) -> None:
    with pytest.raises(ContractLogicError):
        contracts.ViewCall(session.contract("ChallengeManager"), "challenge")(10**9)
