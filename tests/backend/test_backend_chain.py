"""The backend's chain view: contracts made once, a staked verifier's verdict kept for a while."""

from __future__ import annotations

from backend.chain import Chain

VERIFIER = 8  # an anvil account no other backend test stakes


def test_contracts_are_made_once(chain, session) -> None:  # type: ignore[no-untyped-def]
    view = Chain(session.web3, chain[1])
    assert view.contract("Staking") is view.contract("Staking")
    assert view.contract("Staking").address == chain[1].contract("Staking").address


def test_a_staked_verifier_is_trusted_for_the_ttl_and_a_refusal_is_asked_again(chain, session) -> None:  # type: ignore[no-untyped-def]
    address = session.accounts[VERIFIER]
    kept, fresh = Chain(session.web3, chain[1], verifier_ttl_s=3600), Chain(session.web3, chain[1])
    assert not kept.is_staked_verifier(address) and not fresh.is_staked_verifier(address)
    required = session.contract("ProofOfGpu").functions.minVerifierStake().call()
    staking = session.contract("Staking")
    session.send(staking.functions.stake(), address, value=required)
    assert kept.is_staked_verifier(address.lower())  # a refusal is not kept: staked now, let in at once
    session.send(staking.functions.requestUnbond(required), address)
    assert not fresh.is_staked_verifier(address)  # ttl 0: the chain is read every time
    assert kept.is_staked_verifier(address)  # within its ttl the verdict stands
