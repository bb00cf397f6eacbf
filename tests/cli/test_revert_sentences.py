"""The renter's contract refusals as sentences (client.reverts.sentence), checked against the
packaged ABIs: every error the table names exists with the arguments it reads, and the line a user
reads never carries the raw `Name(args)` form."""

from __future__ import annotations

from eth_abi import encode

from client.errors import TransactionReverted
from client.reverts import _SENTENCES, Revert, decode_revert, packaged_errors, sentence
from unchained_cli.errors import explain

SAMPLE = {"address": "0x" + "11" * 20, "uint256": 7, "uint64": 1_800_000_000, "uint8": 2, "bytes32": b"\x22" * 32}


def _encoded(name: str) -> bytes:
    for selector, (error, _names, types) in packaged_errors().items():
        if error == name:
            return selector + encode(list(types), [SAMPLE[t] for t in types])
    raise AssertionError(f"{name} is no custom error of any packaged contract")


def test_every_sentence_names_an_error_of_the_abis_and_reads_its_arguments() -> None:
    for name in _SENTENCES:
        revert = decode_revert(_encoded(name))
        said = sentence(revert)
        assert said is not None, name  # a KeyError on an argument name would give None
        assert name not in said and revert.text not in said, said


def test_a_refused_transaction_is_explained_as_its_sentence() -> None:
    revert = decode_revert(_encoded("ChallengeNotStakedVerifier"))
    estimate = explain(TransactionReverted("challengeJob", revert.error, revert.args, revert.text))
    assert estimate.message.startswith("not your job") and estimate.message.endswith("nothing was sent")
    assert "ChallengeNotStakedVerifier" not in estimate.message
    mined = explain(TransactionReverted("endLease", "LeaseManagerNotActive", {"leaseId": 3}, "x", "0xab"))
    assert mined.message == ("lease 3 has ended: nothing left to do on it (`unchained lease status 3`) "
                             "(tx 0xab reverted)")
    # An error without a sentence keeps its decoded form: something is still said.
    other = explain(TransactionReverted("deploy", "WiringAlreadyDone", {}, "WiringAlreadyDone()"))
    assert "WiringAlreadyDone()" in other.message
    assert sentence(Revert(None, {}, "unknown revert 0x")) is None
