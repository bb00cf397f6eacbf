from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from sqlalchemy import select

from backend import models as m
from backend.api.deps import BackendDep, DbDep, SignedInDep
from backend.api.schemas import (
    ADDRESS_PATTERN,
    ChallengePublic,
    DisputePublic,
    DisputeReportIn,
    DisputeReportPublic,
    SlashPublic,
)
from backend.errors import BadInput, Forbidden, NotFound

log = logging.getLogger(__name__)
router = APIRouter(tags=["disputes"])
IdPath = Annotated[int, Path(ge=0, le=2**63 - 1)]


@router.get("/disputes", response_model=list[DisputePublic])
def list_disputes(
    db: DbDep,
    provider: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[DisputePublic]:
    """Committee disputes (escalated job challenges) and their votes and verdicts."""
    query = select(m.Dispute).order_by(m.Dispute.dispute_id.desc())
    if provider:
        query = query.where(m.Dispute.provider == provider.lower())
    return [DisputePublic.model_validate(r) for r in db.scalars(query.limit(limit).offset(offset))]


# The events that say why Staking slashed, emitted in the same transaction right after its Slashed.
# (contract, event) -> (SlashPublic.cause, the offender's argument, the id's argument)
SLASH_CAUSES: dict[tuple[str, str], tuple[Literal["signed result", "challenge"], str, str]] = {
    ("JobEscrow", "SignedResultSlashed"): ("signed result", "provider", "jobId"),
    ("ChallengeManager", "OffenderSlashed"): ("challenge", "offender", "challengeId")}


@router.get("/slashes", response_model=list[SlashPublic])
def list_slashes(
    db: DbDep,
    offender: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[SlashPublic]:
    """Slashes of staked providers and verifiers, newest first, with the amounts taken and
    rewarded (Staking's Slashed events) and their cause (a signed result that the commit
    contradicts or never followed, or a lost challenge), read from the indexed events."""
    query = (select(m.ChainEvent).where(m.ChainEvent.contract == "Staking", m.ChainEvent.event == "Slashed")
             .order_by(m.ChainEvent.block_number.desc(), m.ChainEvent.log_index.desc()))
    if offender:
        query = query.where(m.ChainEvent.args["offender"].as_string() == offender.lower())
    slashes = list(db.scalars(query.limit(limit).offset(offset)))
    causes = list(db.scalars(
        select(m.ChainEvent).where(m.ChainEvent.tx_hash.in_({e.tx_hash for e in slashes}),
                                   m.ChainEvent.event.in_({name for _, name in SLASH_CAUSES}))
        .order_by(m.ChainEvent.log_index)))
    return [_slash(e, causes) for e in slashes]


def _slash(event: m.ChainEvent, causes: list[m.ChainEvent]) -> SlashPublic:
    """A Slashed event with its cause: the first cause event after it in its transaction that
    names the same offender (a transaction may slash more than once)."""
    a = event.args
    public = SlashPublic(tx_hash=event.tx_hash, block_number=event.block_number, offender=a["offender"],
                         requested=a["requested"], slashed=a["slashed"], reward_recipient=a["rewardRecipient"],
                         reward=a["reward"])
    for cause in causes:
        kind = SLASH_CAUSES.get((cause.contract, cause.event))
        if (kind and cause.tx_hash == event.tx_hash and cause.log_index > event.log_index
                and cause.args[kind[1]] == a["offender"]):
            public.cause = kind[0]
            setattr(public, "job_id" if kind[0] == "signed result" else "challenge_id", cause.args[kind[2]])
            break
    return public


@router.get("/challenges", response_model=list[ChallengePublic])
def list_challenges(
    db: DbDep,
    provider: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    kind: Annotated[str | None, Query(pattern=r"^(pog|job)$")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[ChallengePublic]:
    """Challenges of PoG rounds and job results, the source of providers' reputation."""
    query = select(m.Challenge).order_by(m.Challenge.challenge_id.desc())
    if provider:
        query = query.where(m.Challenge.provider == provider.lower())
    if kind:
        query = query.where(m.Challenge.kind == kind)
    return [ChallengePublic.model_validate(r) for r in db.scalars(query.limit(limit).offset(offset))]


@router.get("/challenges/{challenge_id}", response_model=ChallengePublic, responses={404: {}})
def get_challenge(challenge_id: IdPath, db: DbDep) -> ChallengePublic:
    row = db.get(m.Challenge, challenge_id)
    if row is None:
        raise NotFound("challenge", challenge_id)
    reports = db.scalars(select(m.DisputeReport).where(m.DisputeReport.challenge_id == challenge_id)
                         .order_by(m.DisputeReport.id))
    public = ChallengePublic.model_validate(row)
    public.reports = [DisputeReportPublic.model_validate(r) for r in reports]
    return public


@router.post("/disputes/reports", status_code=201, response_model=DisputeReportPublic,
             responses={401: {}, 403: {}, 422: {}})
def report_decision(body: DisputeReportIn, signer: SignedInDep, backend: BackendDep, db: DbDep) -> DisputeReportPublic:
    """A staked verifier records one decision (passed, challenged, voted, ...) with its evidence:
    the sampled indices, expected and received digests and the transactions it sent."""
    if body.receivedDigests and len(body.receivedDigests) != len(body.indices):
        raise BadInput("receivedDigests must have one entry per index (null where nothing was received)")
    if body.expectedDigests and len(body.expectedDigests) != len(body.indices):
        raise BadInput("expectedDigests must have one entry per index")
    if not backend.chain().is_staked_verifier(signer):
        raise Forbidden(f"{signer} is not a staked verifier")
    row = m.DisputeReport(verifier=signer.lower(), kind=body.kind, subject=body.subject,
                          challenge_id=body.challengeId, decision=body.decision, indices=list(body.indices),
                          expected_digests=list(body.expectedDigests), received_digests=list(body.receivedDigests),
                          tx_hashes=list(body.txHashes), detail=body.detail, reported_at=datetime.now(UTC))
    db.add(row)
    db.commit()
    db.refresh(row)
    log.info("verifier %s reported %s %s %s (challenge %s, txs %s)", row.verifier, row.kind, row.subject,
             row.decision, row.challenge_id, ",".join(row.tx_hashes) or "-")
    return DisputeReportPublic.model_validate(row)


@router.get("/disputes/reports", response_model=list[DisputeReportPublic])
def list_reports(
    db: DbDep,
    subject: Annotated[int | None, Query(ge=0, le=2**63 - 1)] = None,
    kind: Annotated[str | None, Query(pattern=r"^(pog|job)$")] = None,
    verifier: Annotated[str | None, Query(pattern=ADDRESS_PATTERN)] = None,
    challenge: Annotated[int | None, Query(ge=0, le=2**63 - 1)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[DisputeReportPublic]:
    """Verifiers' decisions with their evidence, newest first."""
    query = select(m.DisputeReport).order_by(m.DisputeReport.id.desc())
    if subject is not None:
        query = query.where(m.DisputeReport.subject == subject)
    if kind:
        query = query.where(m.DisputeReport.kind == kind)
    if verifier:
        query = query.where(m.DisputeReport.verifier == verifier.lower())
    if challenge is not None:
        query = query.where(m.DisputeReport.challenge_id == challenge)
    return [DisputeReportPublic.model_validate(r) for r in db.scalars(query.limit(limit).offset(offset))]


# After /disputes/reports: a path parameter route first would swallow "reports".
@router.get("/disputes/{dispute_id}", response_model=DisputePublic, responses={404: {}})
def get_dispute(dispute_id: IdPath, db: DbDep) -> DisputePublic:
    row = db.get(m.Dispute, dispute_id)
    if row is None:
        raise NotFound("dispute", dispute_id)
    return DisputePublic.model_validate(row)
