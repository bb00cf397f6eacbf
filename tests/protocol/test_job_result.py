"""The signed job result: what a provider signs is what anyone recovers, and junk is refused."""

from __future__ import annotations

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils import keccak

from protocol.job_result import EscrowDomain, JobResult, JobResultError, NotSlashable, SignedJobResult, slash_ground

DOMAIN = EscrowDomain(31337, "0x" + "11" * 20)
RESULT = JobResult(7, "0x" + "ab" * 32, 3, "0x" + "cd" * 32, 1_800_000_000)


def test_a_signed_result_recovers_its_provider_and_round_trips_through_json():
    provider = Account.create()
    signature = provider.sign_message(encode_typed_data(full_message=RESULT.typed_data(DOMAIN))).signature
    signed = SignedJobResult(RESULT, provider.address, "0x" + signature.hex().removeprefix("0x"))
    again = SignedJobResult.from_json(signed.to_json())
    assert again == signed
    recovered = Account._recover_hash(again.result.digest(DOMAIN), signature=again.signature)
    assert recovered == provider.address


@pytest.mark.parametrize("domain, result", [
    (DOMAIN, RESULT),
    (EscrowDomain(1, "0x5FbDB2315678afecb367f032d93F642f64180aa3"), JobResult(2**256 - 1, "0x" + "00" * 32, 2**32 - 1,
                                                                             "0x" + "FF" * 32, 2**64 - 1)),
    (EscrowDomain(2**64 + 5, "0x" + "0a" * 20), JobResult(1, "0x" + "5e" * 32, 1, "0x" + "01" * 32, 0)),
])
def test_the_digest_is_eth_accounts_eip712_hash_and_sign_uses_it(domain, result):
    signable = encode_typed_data(full_message=result.typed_data(domain))
    assert result.digest(domain) == keccak(b"\x19" + signable.version + signable.header + signable.body)
    provider = Account.create()
    signed = SignedJobResult.sign(result, domain, provider)
    assert signed.signer(domain) == provider.address  # recovered through eth-account's typed-data path
    assert signed.signature == "0x" + provider.sign_message(signable).signature.hex().removeprefix("0x")


def test_the_digest_binds_every_field_and_the_domain():
    by = RESULT.commit_by
    digests = {RESULT.digest(DOMAIN), JobResult(8, RESULT.output_root, 3, RESULT.result_digest, by).digest(DOMAIN),
               JobResult(7, "0x" + "ac" * 32, 3, RESULT.result_digest, by).digest(DOMAIN),
               JobResult(7, RESULT.output_root, 4, RESULT.result_digest, by).digest(DOMAIN),
               JobResult(7, RESULT.output_root, 3, "0x" + "ce" * 32, by).digest(DOMAIN),
               JobResult(7, RESULT.output_root, 3, RESULT.result_digest, by + 1).digest(DOMAIN),
               RESULT.digest(EscrowDomain(1, DOMAIN.escrow)), RESULT.digest(EscrowDomain(31337, "0x" + "12" * 20))}
    assert len(digests) == 8


def test_a_result_binds_a_missing_commit_only_with_a_margin_before_the_deadline():
    assert RESULT.binding(RESULT.commit_by + 1)
    assert not RESULT.binding(RESULT.commit_by)  # promised at the deadline: no margin, not binding
    assert not RESULT.binding(RESULT.commit_by - 1)


def test_commit_by_travels_in_json_and_is_required():
    doc = SignedJobResult.sign(RESULT, DOMAIN, Account.create()).to_json()
    assert doc["commitBy"] == RESULT.commit_by
    for bad in (None, "soon", 1.5, True, -1, 2**64):
        with pytest.raises(JobResultError):
            SignedJobResult.from_json({**doc, "commitBy": bad})
    with pytest.raises(JobResultError):
        SignedJobResult.from_json({k: v for k, v in doc.items() if k != "commitBy"})


@pytest.mark.parametrize("doc", [None, [], {}, {"jobId": 0, "outputRoot": "0x" + "ab" * 32, "itemCount": 1,
                                                 "resultDigest": "0x" + "cd" * 32, "provider": "0x" + "11" * 20,
                                                 "signature": "0x" + "00" * 65, "commitBy": 1},
                                 {"jobId": 1, "outputRoot": "0xab", "itemCount": 1, "resultDigest": "0x" + "cd" * 32,
                                  "provider": "0x" + "11" * 20, "signature": "0x" + "00" * 65},
                                 {"jobId": 1, "outputRoot": "0x" + "ab" * 32, "itemCount": 2**32,
                                  "resultDigest": "0x" + "cd" * 32, "provider": "0x" + "11" * 20,
                                  "signature": "0x" + "00" * 65},
                                 {"jobId": 1, "outputRoot": "0x" + "ab" * 32, "itemCount": 1,
                                  "resultDigest": "0x" + "cd" * 32, "provider": "nobody", "signature": "0x00"}])
def test_malformed_signed_results_are_refused(doc):
    with pytest.raises(JobResultError):
        SignedJobResult.from_json(doc)


def _ground(result: JobResult = RESULT, *, deadline: int = RESULT.commit_by + 60, committed=None, cancelled=False,
            slashed=False, now: int = RESULT.commit_by + 120) -> str:
    return slash_ground(result, deadline=deadline, committed=committed, cancelled=cancelled, already_slashed=slashed,
                        now=now)


def test_slash_ground_follows_the_escrows_rule():
    same = (RESULT.output_root, RESULT.item_count, RESULT.result_digest)
    assert "not the signed root" in _ground(committed=(RESULT.output_root, 4, RESULT.result_digest))
    # Another commit is slashable whatever commitBy says; a missing one only with a margin.
    assert "not the signed root" in _ground(committed=("0x" + "ee" * 32, 3, RESULT.result_digest),
                                            deadline=RESULT.commit_by)
    assert "never committed" in _ground()
    for kwargs, words in [({"committed": same}, "is the one its provider signed"),
                          ({"deadline": RESULT.commit_by}, "not binding"),
                          ({"cancelled": True}, "cancelled"), ({"slashed": True}, "already slashed")]:
        with pytest.raises(NotSlashable, match=words):
            _ground(**kwargs)
    with pytest.raises(NotSlashable, match="has not passed") as caught:
        _ground(now=RESULT.commit_by + 59)
    assert caught.value.from_time == RESULT.commit_by + 60
