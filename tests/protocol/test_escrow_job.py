"""IJobEscrow.Job in Python: built from JobCreated, committed, hashed and carried in JSON exactly;
malformed records are refused. (The hash is checked against JobEscrow's own in every contract
test: tests/contracts/conftest.py job_of reads jobs through client.escrow_jobs.read_job.)"""

from __future__ import annotations

import pytest
from eth_abi import encode
from eth_utils import keccak

from protocol.escrow_job import EscrowJob, EscrowJobError

CREATED = {"jobId": 7, "renter": "0x" + "11" * 20, "provider": "0x" + "22" * 20, "token": "0x" + "00" * 20,
           "price": 10**16, "specHash": "0x" + "ab" * 32, "deadline": 1_800_000_000}


def test_a_job_from_its_created_event_round_trips_and_hashes_as_abi_encode():
    job = EscrowJob.from_created(CREATED)
    assert not job.is_committed and EscrowJob.from_json(job.to_json()) == job
    types = ["uint256", "address", "address", "address", "uint256", "bytes32", "uint64", "bytes32", "uint256",
             "bytes32"]
    assert job.job_hash() == keccak(encode(types, list(job.as_tuple())))[:24]
    committed = job.committed("0x" + "cd" * 32, 3, b"\xee" * 32)
    assert committed.is_committed and committed.job_hash() != job.job_hash()
    assert EscrowJob.from_json(committed.to_json()) == committed


@pytest.mark.parametrize("doc", [None, [], {**CREATED, "specHash": "0xab"}, {k: v for k, v in CREATED.items()
                                                                           if k != "price"},
                                 {**CREATED, "renter": "nobody"},
                                 # a dispatch's numbers: never truncated, always what the escrow's types hold
                                 {**CREATED, "jobId": 0}, {**CREATED, "jobId": True}, {**CREATED, "price": 1.5},
                                 {**CREATED, "price": "-1"}, {**CREATED, "deadline": 2**64}])
def test_malformed_jobs_are_refused(doc):
    with pytest.raises(EscrowJobError):
        EscrowJob.from_json(doc)
