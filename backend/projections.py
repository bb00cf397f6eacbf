"""What each contract event does to the chain tables. Handlers only read event arguments (and
rows written by earlier events), so replaying the same events rebuilds the same state."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from backend import models as m
from client.log_follower import Event
from protocol.enums import ChallengeStatus, Verdict

ZERO = "0x" + "00" * 20


Handler = Callable[[Session, Event], None]
HANDLERS: dict[tuple[str, str], Handler] = {}


def on(contract: str, name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[(contract, name)] = fn
        return fn
    return register


def apply(session: Session, event: Event) -> None:
    """Applies one event; events without a projection are kept in chain_events only."""
    handler = HANDLERS.get((event.contract, event.name))
    if handler is not None:
        handler(session, event)


def _text32(value: str) -> str:
    """bytes32 labels (GPU model/class) as text, NUL padding removed."""
    return bytes.fromhex(value[2:]).rstrip(b"\0").decode("utf-8", errors="replace")


def _payment(session: Session, e: Event, kind: str, account: str, amount: int,
             token: str = ZERO, ref: int | None = None) -> None:
    session.add(m.Payment(tx_hash=e.tx_hash, log_index=e.log_index, block_number=e.block_number,
                          contract=e.contract, kind=kind, account=account, token=token, amount=amount,
                          ref=ref))


def _stake(session: Session, account: str) -> m.Stake:
    row = session.get(m.Stake, account)
    if row is None:
        row = m.Stake(account=account, bonded=0, unbonding=0, slashed=0)
        session.add(row)
    return row


# ---- Staking ----


@on("Staking", "Staked")
def _staked(s: Session, e: Event) -> None:
    _stake(s, e.args["account"]).bonded = e.args["bonded"]


@on("Staking", "UnbondRequested")
def _unbond(s: Session, e: Event) -> None:
    row = _stake(s, e.args["account"])
    row.bonded -= e.args["amount"]
    row.unbonding = e.args["unbonding"]


@on("Staking", "UnbondedWithdrawn")
def _unbonded(s: Session, e: Event) -> None:
    _stake(s, e.args["account"]).unbonding = 0
    _payment(s, e, "unbonded", e.args["account"], e.args["amount"])


@on("Staking", "Slashed")
def _slashed(s: Session, e: Event) -> None:
    # Staking takes from bonded stake first, then from the unbonding entry.
    row = _stake(s, e.args["offender"])
    slashed = e.args["slashed"]
    from_bonded = min(slashed, row.bonded)
    row.bonded -= from_bonded
    row.unbonding -= slashed - from_bonded
    row.slashed += slashed
    if slashed:
        row.slashed_block = e.block_number
    _payment(s, e, "slashed", e.args["offender"], slashed)


@on("Staking", "Withdrawn")
@on("LeaseManager", "Withdrawn")
@on("ChallengeManager", "Withdrawn")
def _withdrawn(s: Session, e: Event) -> None:
    _payment(s, e, "withdrawn", e.args["account"], e.args["amount"])


# ---- ProviderRegistry ----


@on("ProviderRegistry", "ProviderRegistered")
def _registered(s: Session, e: Event) -> None:
    a = e.args
    s.add(m.Provider(address=a["provider"], gpu_model=_text32(a["gpuModel"]), gpu_count=a["gpuCount"],
                     price_per_gpu_hour=a["pricePerGpuHour"], price_per_job_unit=a["pricePerJobUnit"],
                     metadata_uri=a["metadataURI"], active=True, registered_block=e.block_number,
                     challenges_won=0, challenges_lost=0, jobs_finalized=0))


def _provider(s: Session, address: str) -> m.Provider | None:
    return s.get(m.Provider, address)


@on("ProviderRegistry", "PricesUpdated")
def _prices(s: Session, e: Event) -> None:
    if p := _provider(s, e.args["provider"]):
        p.price_per_gpu_hour = e.args["newPricePerGpuHour"]
        p.price_per_job_unit = e.args["newPricePerJobUnit"]


@on("ProviderRegistry", "MetadataURIUpdated")
def _metadata(s: Session, e: Event) -> None:
    if p := _provider(s, e.args["provider"]):
        p.metadata_uri = e.args["newURI"]


@on("ProviderRegistry", "ProviderDeactivated")
def _deactivated(s: Session, e: Event) -> None:
    if p := _provider(s, e.args["provider"]):
        p.active = False


@on("ProviderRegistry", "ProviderReactivated")
def _reactivated(s: Session, e: Event) -> None:
    if p := _provider(s, e.args["provider"]):
        p.active = True


@on("ProviderRegistry", "PogStatusRecorded")
def _pog_status(s: Session, e: Event) -> None:
    if p := _provider(s, e.args["provider"]):
        p.pog_round_id = e.args["roundId"]
        p.pog_passed = e.args["passed"]
        p.pog_block = e.block_number
        p.gpu_class = _text32(e.args["gpuClass"]) or None
        p.tflops_milli = e.args["tflopsMilli"]


# ---- ProofOfGpu ----


@on("ProofOfGpu", "RoundRequested")
def _round_requested(s: Session, e: Event) -> None:
    a = e.args
    s.add(m.PogRound(round_id=a["roundId"], provider=a["provider"], verifier=a["verifier"], n=a["n"],
                     gpu_count=a["gpuCount"], commit_deadline=a["commitDeadline"],
                     requested_block=e.block_number, status="requested"))


@on("ProofOfGpu", "RoundSeedFixed")
def _round_seed(s: Session, e: Event) -> None:
    if r := s.get(m.PogRound, e.args["roundId"]):
        r.seed = e.args["seed"]
        r.commit_deadline = e.args["commitDeadline"]  # the commit window runs from the verifier's reveal


@on("ProofOfGpu", "RootsCommitted")
def _roots(s: Session, e: Event) -> None:
    if r := s.get(m.PogRound, e.args["roundId"]):
        r.roots = list(e.args["roots"])
        r.status = "committed"


@on("ProofOfGpu", "RoundAttested")
def _attested(s: Session, e: Event) -> None:
    if r := s.get(m.PogRound, e.args["roundId"]):
        r.status = "attested"
        r.measured_millis = e.args["measuredMillis"]
        r.gpu_class = _text32(e.args["gpuClass"]) or None
        r.tflops_milli = e.args["tflopsMilli"]
        r.passed = e.args["passed"]


@on("ProofOfGpu", "RoundFailed")
def _round_failed(s: Session, e: Event) -> None:
    if r := s.get(m.PogRound, e.args["roundId"]):
        r.status = "failed"
        r.passed = False


@on("ProofOfGpu", "RoundVoided")
def _round_voided(s: Session, e: Event) -> None:
    """The verifier never revealed its secret: no verdict either way on the provider."""
    if r := s.get(m.PogRound, e.args["roundId"]):
        r.status = "voided"


# ---- JobEscrow ----


@on("JobEscrow", "JobCreated")
def _job_created(s: Session, e: Event) -> None:
    a = e.args
    s.add(m.Job(job_id=a["jobId"], renter=a["renter"], provider=a["provider"], token=a["token"],
                price=a["price"], spec_hash=a["specHash"], deadline=a["deadline"], status="funded",
                frozen=False, funded_tx=e.tx_hash, funded_block=e.block_number))
    _payment(s, e, "escrowed", a["renter"], a["price"], a["token"], a["jobId"])


def _job(s: Session, job_id: int) -> m.Job | None:
    return s.get(m.Job, job_id)


@on("JobEscrow", "ResultCommitted")
def _result(s: Session, e: Event) -> None:
    if j := _job(s, e.args["jobId"]):
        j.status = "committed"
        j.output_root = e.args["outputRoot"]
        j.item_count = e.args["itemCount"]
        j.result_digest = e.args["resultDigest"]
        j.challenge_window_end = e.args["challengeWindowEnd"]
        j.cancellable_at = None  # a commit voids a requested cancel
        if j.result_signature is not None:  # the renter's evidence if the commit is not what was signed
            j.commit_matches_signed = j.commit_is_signed_result()


@on("JobEscrow", "JobCancelRequested")
def _cancel_requested(s: Session, e: Event) -> None:
    """The renter asked to cancel: the job stays funded (the provider may still commit, which
    voids the request) until cancel refunds it at cancellableAt."""
    if (j := _job(s, e.args["jobId"])) and j.status == "funded":
        j.status = "cancel requested"
        j.cancellable_at = e.args["cancellableAt"]


@on("JobEscrow", "JobFinalized")
def _finalized(s: Session, e: Event) -> None:
    if j := _job(s, e.args["jobId"]):
        j.status = "finalized"
        j.provider_amount = e.args["providerAmount"]
        j.fee = e.args["fee"]
        _payment(s, e, "paid", e.args["provider"], e.args["providerAmount"], j.token, j.job_id)
        if p := _provider(s, e.args["provider"]):
            p.jobs_finalized += 1


@on("JobEscrow", "JobCancelled")
@on("JobEscrow", "JobExpired")
def _refunded(s: Session, e: Event) -> None:
    if j := _job(s, e.args["jobId"]):
        j.status = "refunded"
        j.refund = e.args["refund"]
        _payment(s, e, "refunded", e.args["renter"], e.args["refund"], j.token, j.job_id)


@on("JobEscrow", "JobFailed")
def _failed(s: Session, e: Event) -> None:
    """The provider could not run the job and said so on-chain; the renter was refunded in full
    in the same transaction."""
    if j := _job(s, e.args["jobId"]):
        j.status = "refunded"
        j.refund = e.args["refund"]
        j.failure_reason = e.args["reason"]
        _payment(s, e, "refunded", j.renter, e.args["refund"], j.token, j.job_id)


@on("JobEscrow", "JobFrozen")
def _frozen(s: Session, e: Event) -> None:
    if j := _job(s, e.args["jobId"]):
        j.frozen = True


@on("JobEscrow", "JobUnfrozen")
def _unfrozen(s: Session, e: Event) -> None:
    if j := _job(s, e.args["jobId"]):
        j.frozen = False
        if e.args["providerAtFault"] and e.args["renterRefund"]:  # zero: a slash refunded it already
            j.status = "refunded"
            j.refund = e.args["renterRefund"]
            _payment(s, e, "refunded", j.renter, e.args["renterRefund"], j.token, j.job_id)


@on("JobEscrow", "SignedResultSlashed")
def _result_slashed(s: Session, e: Event) -> None:
    """The provider was slashed with its signed result; a job whose price the escrow still held
    was refunded to its renter in the same transaction (the provider is paid nothing for it)."""
    if j := _job(s, e.args["jobId"]):
        j.result_slashed = True
        if e.args["renterRefund"]:
            j.status = "refunded"
            j.refund = e.args["renterRefund"]
            _payment(s, e, "refunded", j.renter, e.args["renterRefund"], j.token, j.job_id)


@on("JobEscrow", "Withdrawn")
def _escrow_withdrawn(s: Session, e: Event) -> None:
    _payment(s, e, "withdrawn", e.args["account"], e.args["amount"], e.args["token"])


# ---- LeaseManager ----


@on("LeaseManager", "LeaseStarted")
def _lease_started(s: Session, e: Event) -> None:
    a = e.args
    s.add(m.Lease(lease_id=a["leaseId"], renter=a["renter"], provider=a["provider"], gpu_count=a["gpuCount"],
                  ends_at=a["endsAt"], paid=a["paid"], status="active"))
    _payment(s, e, "escrowed", a["renter"], a["paid"], ZERO, a["leaseId"])


@on("LeaseManager", "LeaseEnded")
def _lease_ended(s: Session, e: Event) -> None:
    if lease := s.get(m.Lease, e.args["leaseId"]):
        lease.status = "ended"
        lease.ended_by = e.args["endedBy"]
        lease.provider_earned = e.args["providerEarned"]
        lease.renter_refund = e.args["renterRefund"]


# ---- ChallengeManager and DisputeCommittee ----


@on("ChallengeManager", "PogChallenged")
def _pog_challenged(s: Session, e: Event) -> None:
    a = e.args
    s.add(m.Challenge(challenge_id=a["challengeId"], kind="pog", subject=a["roundId"], gpu_index=a["gpuIndex"],
                      challenger=a["challenger"], provider=a["provider"], k=a["k"], bond=a["bond"],
                      response_deadline=a["responseDeadline"], status="open"))


@on("ChallengeManager", "JobChallenged")
def _job_challenged(s: Session, e: Event) -> None:
    a = e.args
    s.add(m.Challenge(challenge_id=a["challengeId"], kind="job", subject=a["jobId"], gpu_index=None,
                      challenger=a["challenger"], provider=a["provider"], k=a["k"], bond=a["bond"],
                      response_deadline=a["responseDeadline"], status="open"))


@on("ChallengeManager", "ChallengeRandomnessFixed")
def _randomness(s: Session, e: Event) -> None:
    if c := s.get(m.Challenge, e.args["challengeId"]):
        c.randomness = e.args["randomness"]


@on("ChallengeManager", "ChallengeAnswered")
def _answered(s: Session, e: Event) -> None:
    if c := s.get(m.Challenge, e.args["challengeId"]):
        c.status = "answered"


@on("ChallengeManager", "ChallengeEscalated")
def _escalated(s: Session, e: Event) -> None:
    if c := s.get(m.Challenge, e.args["challengeId"]):
        c.status = "escalated"
        c.dispute_id = e.args["disputeId"]


@on("ChallengeManager", "ChallengeClosed")
def _closed(s: Session, e: Event) -> None:
    c = s.get(m.Challenge, e.args["challengeId"])
    if c is None:
        return
    c.status = ChallengeStatus(e.args["status"]).name.lower()
    # Reputation: a provider that answered (or was wrongly accused) gains, one slashed loses.
    if p := _provider(s, c.provider):
        if c.status in ("settled", "challenger_faulted"):
            p.challenges_won += 1
        elif c.status == "provider_faulted":
            p.challenges_lost += 1


@on("ChallengeManager", "Credited")
def _credited(s: Session, e: Event) -> None:
    _payment(s, e, "credited", e.args["account"], e.args["amount"], ZERO, e.args["challengeId"])


@on("DisputeCommittee", "DisputeOpened")
def _dispute_opened(s: Session, e: Event) -> None:
    a = e.args
    s.add(m.Dispute(dispute_id=a["disputeId"], ref=a["ref"], opener=a["opener"], challenger=a["challenger"],
                    provider=a["provider"], vote_end=a["voteEnd"], votes=0, weight_provider_at_fault=0,
                    weight_challenger_wrong=0))


@on("DisputeCommittee", "Voted")
def _voted(s: Session, e: Event) -> None:
    if d := s.get(m.Dispute, e.args["disputeId"]):
        d.votes += 1
        if e.args["providerAtFault"]:
            d.weight_provider_at_fault += e.args["weight"]
        else:
            d.weight_challenger_wrong += e.args["weight"]


@on("DisputeCommittee", "DisputeResolved")
def _dispute_resolved(s: Session, e: Event) -> None:
    if d := s.get(m.Dispute, e.args["disputeId"]):
        d.verdict = Verdict(e.args["verdict"]).name.lower()
        d.weight_provider_at_fault = e.args["weightProviderAtFault"]
        d.weight_challenger_wrong = e.args["weightChallengerWrong"]
