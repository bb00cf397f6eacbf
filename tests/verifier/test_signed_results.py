"""The verifier slashes with providers' signed results (issue 32: nothing in the product submitted
slashSignedResult). Over the real backend (served, indexing the chain) and anvil: a provider that
promised a commit before the deadline and never made it, and one that committed another result
than it signed, are slashed by a verifier's tick, and their renters refunded; a result signed
without a margin (commitBy at the deadline) is left alone."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import create_engine, update

from backend import models as m
from client.escrow_jobs import read_job
from protocol.job_result import EscrowDomain, JobResult, SignedJobResult
from protocol.merkle import MerkleTree, keccak256, leaf_hash
from provider_agent.backend_client import BackendClient
from tests.support.accounts import dev_account
from tests.support.e2e_market import ETH, Market, market  # noqa: F401  (market: a fixture)
from tests.support.waiting import wait_until
from verifier.backend_client import VerifierBackend
from verifier.chain import VerifierChain
from verifier.signed_results import SignedResultSlasher

pytestmark = [pytest.mark.e2e]

PROVIDER, RENTER, VERIFIER = 1, 3, 5  # anvil account indices
ZERO = "0x" + "00" * 20
OUTPUTS = [b"signed-%d" % i for i in range(3)]


def _register(market: Market, address: str) -> None:
    s = market.session
    registry, staking = s.contract("ProviderRegistry"), s.contract("Staking")
    s.send(staking.functions.stake(), address, value=4 * ETH)
    if not registry.functions.isRegistered(address).call():
        s.send(registry.functions.register(b"CPU".ljust(32, b"\0"), [keccak256(b"slash-gpu")], 10**16, 10**12, ""),
               address)


def _job_with_signed_result(market: Market, provider: str, renter: str, commit_margin: int) -> tuple[int, JobResult]:
    """A funded job and its provider's signed result delivered to the backend; commitBy is
    `commit_margin` seconds before the deadline (0: at the deadline, no margin)."""
    s = market.session
    escrow = s.contract("JobEscrow")
    deadline = s.now() + 600
    s.send(escrow.functions.createJob(provider, keccak256(b"slash-spec"), 10**15, deadline), renter, value=10**15)
    job_id = escrow.functions.jobCount().call()
    tree = MerkleTree([leaf_hash(keccak256(o)) for o in OUTPUTS])
    result = JobResult(job_id, "0x" + tree.root.hex(), len(OUTPUTS), "0x" + keccak256(b"".join(OUTPUTS)).hex(),
                       deadline - commit_margin)
    domain = EscrowDomain(market.deployment.chain_id, market.deployment.contract("JobEscrow").address)
    key = dev_account(PROVIDER)
    wait_until(lambda: httpx.get(f"{market.backend_url}/jobs/{job_id}").status_code == 200, 20, f"job {job_id} indexed")
    BackendClient(market.backend_url, key).deliver_result(SignedJobResult.sign(result, domain, key).to_json())
    return job_id, result


def test_the_verifier_slashes_a_missing_or_different_commit_and_leaves_a_result_without_margin(market):  # noqa: F811
    s = market.session
    provider, renter = s.accounts[PROVIDER], s.accounts[RENTER]
    _register(market, provider)
    escrow, staking = s.contract("JobEscrow"), s.contract("Staking")
    never, _ = _job_with_signed_result(market, provider, renter, commit_margin=60)
    no_margin, _ = _job_with_signed_result(market, provider, renter, commit_margin=0)
    other, _ = _job_with_signed_result(market, provider, renter, commit_margin=60)
    s.send(escrow.functions.commitResult(read_job(escrow, other).as_tuple(), keccak256(b"another root"), 3,
                                         keccak256(b"another digest")), provider)
    account = dev_account(VERIFIER)
    chain = VerifierChain.connect(market.chain.rpc_url, market.deployment, account)
    slasher = SignedResultSlasher(chain, VerifierBackend(market.backend_url, account), interval_s=0)
    api = httpx.Client(base_url=market.backend_url, timeout=10)
    wait_until(lambda: api.get(f"/jobs/{other}").json()["commit_matches_signed"] is False, 20, "the commit indexed")

    stake, owed = staking.functions.stakeOf(provider).call(), escrow.functions.owedTo(ZERO, renter).call()
    assert slasher.tick() == [other]  # committed something else: due at once; the others' deadlines are ahead
    s.advance(601)
    wait_until(lambda: api.get("/health").status_code == 200, 10, "the backend answers")
    assert slasher.tick() == [never]  # promised before the deadline, never committed
    assert slasher.tick() == []  # done: nothing slashed twice, the result without margin never
    minimum = s.contract("ProviderRegistry").functions.minProviderStake().call()
    assert staking.functions.stakeOf(provider).call() == stake - 2 * minimum
    assert escrow.functions.owedTo(ZERO, renter).call() == owed + 2 * 10**15  # neither job pays the provider
    assert escrow.functions.jobState(no_margin).call().resultSlashed is False
    assert staking.functions.owedTo(account.address).call() > 0  # the verifier's reward share


def test_a_backend_that_calls_a_slashable_commit_matching_or_made_hides_it_from_no_verifier(market):  # noqa: F811
    """The backend's list is a hint, not a filter: a backend siding with the provider rewrites its
    rows (a different commit shown as matching the signed result; a commit that never came shown
    as made). The verifier reads every job with a signed result and decides from the chain."""
    s = market.session
    provider, renter = s.accounts[PROVIDER], s.accounts[RENTER]
    _register(market, provider)
    escrow = s.contract("JobEscrow")
    never, _ = _job_with_signed_result(market, provider, renter, commit_margin=60)
    other, _ = _job_with_signed_result(market, provider, renter, commit_margin=60)
    s.send(escrow.functions.commitResult(read_job(escrow, other).as_tuple(), keccak256(b"another root"), 3,
                                         keccak256(b"another digest")), provider)
    api = httpx.Client(base_url=market.backend_url, timeout=10)
    wait_until(lambda: api.get(f"/jobs/{other}").json()["commit_matches_signed"] is False, 20, "the commit indexed")
    engine = create_engine(market.backend_settings.db_url)
    with engine.begin() as db:  # the lie
        db.execute(update(m.Job).where(m.Job.job_id == other).values(commit_matches_signed=True))
        db.execute(update(m.Job).where(m.Job.job_id == never).values(
            output_root="0x" + keccak256(b"made up").hex(), item_count=3, commit_matches_signed=True))
    engine.dispose()
    assert api.get(f"/jobs/{other}").json()["commit_matches_signed"] is True
    assert api.get(f"/jobs/{never}").json()["output_root"] is not None

    account = dev_account(VERIFIER)
    chain = VerifierChain.connect(market.chain.rpc_url, market.deployment, account)
    slasher = SignedResultSlasher(chain, VerifierBackend(market.backend_url, account), interval_s=0)
    assert slasher.tick() == [other]
    s.advance(601)
    wait_until(lambda: api.get("/health").status_code == 200, 10, "the backend answers")
    assert slasher.tick() == [never]
    assert escrow.functions.jobState(never).call().resultSlashed and escrow.functions.jobState(other).call().resultSlashed
