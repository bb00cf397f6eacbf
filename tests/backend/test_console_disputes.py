"""The verifier's and the challenger's day at the console against a live backend and anvil:
`verifier status` (stake, open challenges raised, audits reported, payouts owed), `verifier leave`
(unbonding and until when; the contract's refusals as sentences), and `job challenge --escalate`
with a sentence for every refusal the contract can give."""

from __future__ import annotations

import json
import re
from pathlib import Path

import backend_support as support
import httpx
import pytest
import typer
from eth_account import Account

from protocol.jobs import keccak256
from renter.cli import job_app
from tests.support.console import Console, folded
from tests.support.waiting import wait_until
from unchained_cli.errors import GuardedGroup
from verifier.backend_client import VerifierBackend
from verifier.cli import verifier_app

ETH = 10**18
root = typer.Typer(cls=GuardedGroup)  # errors end as `unchained` shows them: one line
root.add_typer(job_app, name="job")
root.add_typer(verifier_app, name="verifier")
console = Console(root)
_run, _chain_args = console.run, support.chain_args


def _ok(*args: str) -> str:
    return folded(console.ok(*args))


@pytest.fixture
def keystore_of(keystore: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Anvil account `index`'s keystore, under the password the `keystore` fixture's file holds."""
    def make(index: int) -> Path:
        path = tmp_path / f"account-{index}.json"
        path.write_text(json.dumps(Account.encrypt(support.anvil_key(index).key, "correct horse")))
        return path
    return make


def _committed_job(session, market, tag: bytes) -> tuple[int, list[bytes], object]:  # type: ignore[no-untyped-def]
    job_id = support.funded_job(session, market.renter, market.provider, keccak256(tag), 10**15)
    outputs = [tag + b"-%d" % i for i in range(4)]
    return job_id, outputs, support.commit_outputs(session, market.provider, job_id, outputs)


def _answer(session, market, challenge_id: int, outputs: list[bytes], tree) -> None:  # type: ignore[no-untyped-def]
    challenges = session.contract("ChallengeManager")
    indices = challenges.functions.challengeIndices(challenge_id).call()
    session.send(challenges.functions.respond(challenge_id, [keccak256(outputs[i]) for i in indices],
                                              [list(tree.proof(i)) for i in indices]), market.provider)


def _challenge_of(server: str, job_id: int) -> dict:  # type: ignore[type-arg]
    rows = [c for c in httpx.get(f"{server}/challenges", params={"kind": "job", "limit": 500}).json()
            if c["subject"] == job_id]
    return rows[0] if rows else {"status": None}


def test_escalate_sends_the_answered_challenge_to_the_committee_and_says_every_refusal(  # type: ignore[no-untyped-def]
        server, chain, session, market, keystore, keystore_of) -> None:
    challenges, committee = session.contract("ChallengeManager"), session.contract("DisputeCommittee")
    me = ["--keystore", str(keystore), *_chain_args(chain)]
    job_id, outputs, tree = _committed_job(session, market, b"escalated")

    code, said = _run("job", "challenge", str(job_id), "--escalate", *me)
    assert code == 1 and f"job {job_id} has no open challenge to escalate" in said, said
    said = _ok("job", "challenge", str(job_id), "--k", "2", *me)
    challenge_id = int(re.search(r"challenge (\d+) on job", said).group(1))
    assert f"unchained job challenge {job_id} --escalate" in said
    code, said = _run("job", "challenge", str(job_id), "--escalate", "--k", "3", *me)
    assert code == 2 and "--escalate" in said and "takes neither" in said, said

    # Before the provider answers: nothing to judge yet.
    code, said = _run("job", "challenge", str(job_id), "--escalate", *me)
    assert code == 1 and f"challenge {challenge_id} is not answered yet" in said and "nothing was sent" in said, said
    assert "ChallengeWrongStatus" not in said

    session.mine(2)
    _answer(session, market, challenge_id, outputs, tree)
    wait_until(lambda: _challenge_of(server, job_id)["status"] == "answered", 15, "the answer indexed")
    said = _ok("job", "status", str(job_id), "--backend", server, *_chain_args(chain))
    assert "answered by the provider: its challenger may escalate it" in said, said
    assert f"`unchained job challenge {job_id} --escalate`" in said
    # Only its challenger may escalate it.
    code, said = _run("job", "challenge", str(job_id), "--escalate", "--keystore", str(keystore_of(7)),
                      *_chain_args(chain))
    assert code == 1 and f"challenge {challenge_id} is not yours" in said and "ChallengeNotChallenger" not in said, said

    said = _ok("job", "challenge", str(job_id), "--escalate", *me)
    dispute_id = challenges.functions.challenge(challenge_id).call().disputeId
    assert dispute_id and f"escalated to the committee as dispute {dispute_id}" in said, said
    assert "staked verifiers vote until" in said and "goes to the provider" in said
    assert committee.functions.dispute(dispute_id).call().ref == challenge_id

    code, said = _run("job", "challenge", str(job_id), "--escalate", *me)
    assert code == 1 and f"challenge {challenge_id} is escalated already" in said, said

    # An answer left past its escalation window: too late, said with the date.
    late_job, outputs, tree = _committed_job(session, market, b"late")
    _ok("job", "challenge", str(late_job), "--k", "2", *me)
    late = challenges.functions.activeJobChallenge(late_job).call()
    session.mine(2)
    _answer(session, market, late, outputs, tree)
    session.advance(challenges.functions.escalationWindow().call() + 1)
    code, said = _run("job", "challenge", str(late_job), "--escalate", *me)
    assert code == 1 and f"challenge {late}'s window closed at" in said and "too late" in said, said
    assert "ChallengeWindowClosed" not in said


def test_verifier_status_and_leave(server, chain, session, market, keystore, keystore_of) -> None:  # type: ignore[no-untyped-def]
    verifier = keystore_of(4)  # the market's verifier: a PoG challenge open, a job dispute won
    staking, challenges = session.contract("Staking"), session.contract("ChallengeManager")
    bonded = staking.functions.stakeOf(market.verifier).call()
    VerifierBackend(server, support.anvil_key(4)).report("job", 1, "passed")
    VerifierBackend(server, support.anvil_key(4)).report("job", 2, "challenged", challenge_id=2)

    doc = json.loads(_ok("verifier", "status", "--keystore", str(verifier), "--backend", server, "-o", "json",
                         *_chain_args(chain)))
    assert doc["address"] == market.verifier and int(doc["bonded"]) == bonded and doc["unbonding"] == "0"
    statuses = {c["challenge_id"]: c["status"] for c in doc["raised"]}
    assert sorted(statuses.values()) == ["open", "provider_faulted"], statuses
    assert doc["open_challenges"] == [c for c, s in statuses.items() if s == "open"]
    assert doc["audits"] == {"passed": 1, "challenged": 1}
    owed = challenges.functions.owedTo(market.verifier).call()
    assert owed and {"contract": "ChallengeManager", "what": "owed balance", "amount": str(owed),
                     "symbol": "ETH"} in doc["owed"]
    text = _ok("verifier", "status", "--address", market.verifier, *_chain_args(chain))
    assert "(bonded)" in text and "challenges raised 2, 1 open" in text and "unchained withdraw" in text, text
    code, said = _run("verifier", "status", "--address", "0x123", *_chain_args(chain))
    assert code == 2 and "'0x123' is not an address" in said, said

    said = _ok("verifier", "leave", "--keystore", str(verifier), *_chain_args(chain))
    release = staking.functions.unbondingOf(market.verifier).call().releaseAt
    assert staking.functions.stakeOf(market.verifier).call() == 0
    assert "withdrawable from" in said and "unchained withdraw" in said and "is still open" in said, said
    status = _ok("verifier", "status", "--address", market.verifier, *_chain_args(chain))
    assert "unbonding" in status and "withdrawable from" in status and "below the" in status, status
    assert json.loads(_ok("verifier", "status", "--address", market.verifier, "-o", "json",
                          *_chain_args(chain)))["release_at"] == release
    code, said = _run("verifier", "leave", "--keystore", str(verifier), *_chain_args(chain))
    assert code == 1 and "has nothing bonded" in said and "withdrawable from" in said, said

    # An account whose stake holds open work: the contract refuses, said as a sentence.
    support.funded_job(session, market.renter, market.provider, keccak256(b"open-work"), 10**15)
    assert staking.functions.openWorkOf(market.provider).call() > 0
    code, said = _run("verifier", "leave", "--keystore", str(keystore_of(1)), *_chain_args(chain))
    assert code == 1 and "open job(s) or lease(s) holding its stake" in said and "StakingWorkOpen" not in said, said
