"""A transaction's data: arguments in the codec's own form skip web3's normalizing walk
(client.tx.calldata); every call still encodes byte for byte as web3 encodes it, and what web3
converts or refuses it still converts or refuses."""

from __future__ import annotations

import os

import pytest
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import InvalidAddress

from client.contracts import bind
from client.tx import calldata
from protocol.escrow_job import EscrowJob
from unchained_cli.deploy import load_artifact

ADDRESS = Web3.to_checksum_address("0x" + "ab" * 20)
OTHER = Web3.to_checksum_address("0x" + "cd" * 20)


def contract(name: str):  # type: ignore[no-untyped-def]
    return bind(Web3(), ADDRESS, load_artifact(name)["abi"])


def escrow_jobs(n: int) -> list[EscrowJob]:
    return [EscrowJob(id=i, renter=ADDRESS, provider=OTHER, token="0x" + "00" * 20, price=10**16 + i,
                      spec_hash=os.urandom(32), deadline=2_000_000_000) for i in range(n)]


def jobs(n: int) -> list[tuple]:
    return [job.as_tuple() for job in escrow_jobs(n)]


def calls():  # type: ignore[no-untyped-def]
    escrow, registry, challenges = contract("JobEscrow"), contract("ProviderRegistry"), contract("ChallengeManager")
    batch = jobs(3)
    committed = [job.committed(os.urandom(32), 4, os.urandom(32)).as_tuple() for job in escrow_jobs(3)]
    return [
        escrow.functions.commitResults(batch, [os.urandom(32)] * 3, [4, 5, 6], [os.urandom(32)] * 3),
        escrow.functions.finalizeJobsAndWithdraw(committed),
        escrow.functions.withdraw("0x" + "00" * 20),
        registry.functions.register(os.urandom(32), [os.urandom(32)], 1, 2, "ipfs://ünïcode metadata"),
        challenges.functions.proveFraud(1, 2, os.urandom(100), [os.urandom(32)], 3),
        escrow.functions.commitResults(batch, ["0x" + "11" * 32] * 3, [4, 5, 6], [os.urandom(32)] * 3),  # hex: web3's way
        registry.functions.register(bytes(32), [], 1, 2, "x"),
    ]


def web3s(call) -> str:  # type: ignore[no-untyped-def]
    """The call's data as web3's public encoder writes it (normalizing its arguments)."""
    return bind(Web3(), call.address, call.contract_abi).encode_abi(call.fn_name, args=call.arguments)


@pytest.mark.parametrize("index", range(7))
def test_every_call_encodes_as_web3_encodes_it(index: int) -> None:
    call = calls()[index]
    assert calldata(call) == web3s(call)


def test_a_lowercase_address_is_still_refused() -> None:
    escrow = contract("JobEscrow")
    lowercase = [(*job[:2], job[2].lower(), *job[3:]) for job in jobs(1)]
    with pytest.raises(InvalidAddress):  # web3 insists on checksummed addresses; the codec would not
        calldata(escrow.functions.commitResults(lowercase, [os.urandom(32)], [4], [os.urandom(32)]))


def test_arguments_in_the_codecs_form_skip_web3s_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = calls()[:5]
    expected = [web3s(call) for call in plain]

    def refused(_call: object) -> str:
        raise AssertionError("went through web3's normalizing encoder")

    monkeypatch.setattr(Contract, "encode_abi", refused)
    assert [calldata(call) for call in plain] == expected
