"""Contract refusals as sentences (client.reverts.sentence), checked against the packaged ABIs:
every custom error of every contract has one, each reads the arguments the ABI gives it, and the
line a user reads never carries the raw `Name(args)` form."""

from __future__ import annotations

from typing import Any

from eth_abi import encode
from eth_utils import keccak

from client.errors import TransactionReverted
from client.revert_sentences import SENTENCES
from client.reverts import Revert, decode_revert, packaged_errors, sentence
from unchained_cli.errors import explain

SAMPLE: dict[str, Any] = {
    "address": "0x" + "11" * 20, "uint256": 7, "uint64": 1_800_000_000, "uint8": 2, "bytes32": b"\x22" * 32,
    "int256": -3, "string": "a name",
}


def _encoded(name: str) -> bytes:
    for selector, (error, _names, types) in packaged_errors().items():
        if error == name:
            return selector + encode(list(types), [SAMPLE[t] for t in types])
    raise AssertionError(f"{name} is no custom error of any packaged contract")


def test_every_custom_error_of_every_packaged_contract_has_a_sentence() -> None:
    declared = {error for error, _names, _types in packaged_errors().values()}
    assert len(declared) > 100  # the artifacts are packaged: an empty table would pass vacuously
    assert sorted(declared - SENTENCES.keys()) == []  # a contract gained an error: say it in client/revert_sentences
    assert sorted(SENTENCES.keys() - declared) == []  # a sentence for an error no contract declares any more


def test_every_sentence_reads_its_arguments_and_never_shows_the_raw_error() -> None:
    for name in SENTENCES:
        revert = decode_revert(_encoded(name))
        said = sentence(revert)
        assert said is not None, name  # a KeyError on an argument name would give None
        assert name not in said and revert.text not in said, said


def test_a_sentence_reads_the_values_it_was_given() -> None:
    revert = decode_revert(_encoded("ProofOfGpuWrongRootCount"))
    assert sentence(revert) == "round 7 needs 7 root(s), one per GPU, not 7"
    said = sentence(Revert("JobEscrowWrongValue", {"sent": 10**18, "price": 2 * 10**18}))
    assert said == "1 ETH was sent, but the job costs exactly 2 ETH: send the price"
    role = {"account": SAMPLE["address"], "neededRole": keccak(text="DISPUTE_ROLE")}
    said = sentence(Revert("AccessControlUnauthorizedAccount", role))
    assert said is not None and said.startswith(f"{SAMPLE['address']} lacks the DISPUTE_ROLE role")


def test_a_value_past_what_a_date_holds_falls_back_to_the_decoded_form() -> None:
    revert = Revert("JobEscrowDeadlineInPast", {"deadline": 2**64 - 1}, f"JobEscrowDeadlineInPast({2**64 - 1})")
    assert sentence(revert) is None
    assert str(2**64 - 1) in explain(TransactionReverted("createJob", revert.error, revert.args, revert.text)).message


def test_a_refused_transaction_is_explained_as_its_sentence() -> None:
    revert = decode_revert(_encoded("ChallengeNotStakedVerifier"))
    estimate = explain(TransactionReverted("challengeJob", revert.error, revert.args, revert.text))
    assert estimate.message.startswith("not your job") and estimate.message.endswith("nothing was sent")
    assert "ChallengeNotStakedVerifier" not in estimate.message
    mined = explain(TransactionReverted("endLease", "LeaseManagerNotActive", {"leaseId": 3}, "x", "0xab"))
    assert mined.message == ("lease 3 has ended: nothing left to do on it (`unchained lease status 3`) "
                             "(tx 0xab reverted)")
    # A revert no ABI declares has no sentence: what the node gave is still said.
    unknown = decode_revert("0xdeadbeef")
    assert unknown.error is None and sentence(unknown) is None
    other = explain(TransactionReverted("deploy", unknown.error, unknown.args, unknown.text))
    assert "unknown revert 0xdeadbeef" in other.message
