"""Slashing with providers' signed results, automatically: the renter's remedy, carried out by a
verifier that watches (issue 32: nothing in the product submitted slashSignedResult before).

A provider hands the renter an EIP-712 signed result (protocol/job_result.py) before its batched
commit. Each tick this verifier asks the backend which jobs hold a signed result (GET /jobs: delivered;
what a row says of the commit is a hint, never a filter: see `candidates`), reads that job's
signed result (GET /jobs/{id}/result) and decides from the chain alone: the signature must recover to the job's provider under JobEscrow's domain, and protocol.job_result's
`slash_ground` (JobEscrow's own rule: another commit; or a promise before the deadline, no commit,
deadline passed; not cancelled, not slashed yet) must hold. Then it sends slashSignedResult: the
provider loses the minimum stake, the verifier earns Staking's reward share, and a job whose
price the escrow still holds goes back to its renter. The backend is trusted for availability
only: a job it names wrongly costs a read, never a transaction that reverts.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from client.backend_http import BackendRefused, BackendUnavailable
from client.contracts import emitted
from client.errors import NodeUnavailable, TransactionReverted
from client.escrow_jobs import read_job
from protocol.job_result import EscrowDomain, JobResultError, NotSlashable, SignedJobResult, slash_ground
from verifier.backend_client import VerifierBackend
from verifier.chain import VerifierChain

logger = logging.getLogger(__name__)

PAGE = 500  # GET /jobs's largest page
MAX_PAGES = 20  # the newest 10,000 jobs a tick


@dataclass
class SignedResultSlasher:
    chain: VerifierChain
    backend: VerifierBackend
    interval_s: float = 15.0  # between passes over the backend's list
    # A signed job not committed yet is read again after this long (chain seconds), not only at
    # its deadline: a different commit hidden by the backend's list is found inside the job's
    # challenge window, while the slash still refunds the price.
    recheck_s: int = 300
    done: set[int] = field(default_factory=set)  # slashed, or never slashable: not read again
    _later: dict[int, int] = field(default_factory=dict)  # job -> chain time it may become slashable
    _next_pass: float = 0.0

    def __post_init__(self) -> None:
        self.escrow = self.chain.contract("JobEscrow")
        self.domain = EscrowDomain(self.chain.deployment.chain_id, self.escrow.address)

    def candidates(self, now: int) -> list[int]:
        """Jobs the backend shows with a signed result, not decided yet and not waiting for a
        later chain time. Every one is read, whatever the row says of its commit: a backend
        siding with the provider could show a different commit as matching
        (`commit_matches_signed`) or a missing one as made (`output_root`), and a filter on them
        would hide the slash. The cost: each signed job's result is read once signed, then every
        `recheck_s` until its commit or its deadline (usually once or twice)."""
        found: list[int] = []
        for page in range(MAX_PAGES):
            rows = self.backend.jobs(limit=PAGE, offset=page * PAGE)
            for row in rows:
                job_id = int(row["job_id"])
                if row.get("result_available_at") is None or job_id in self.done:
                    continue
                # A commit the backend shows as differing is read at once (an honest backend's
                # hint: the slash refunds the price only inside the challenge window).
                if self._later.get(job_id, 0) <= now or row.get("commit_matches_signed") is False:
                    found.append(job_id)
            if len(rows) < PAGE:
                break
        return found

    def tick(self) -> list[int]:
        """One pass (at most every interval_s); returns the jobs whose providers were slashed now."""
        if time.monotonic() < self._next_pass:
            return []
        self._next_pass = time.monotonic() + self.interval_s
        slashed = []
        try:
            for job_id in self.candidates(self.chain.now()):
                if self.slash_if_due(job_id):
                    slashed.append(job_id)
        except (BackendUnavailable, BackendRefused) as exc:
            logger.warning("signed results: the backend cannot list jobs now, again in %.0f s: %s",
                           self.interval_s, exc)
        return slashed

    def slash_if_due(self, job_id: int) -> bool:
        """Slashes job `job_id`'s provider with its signed result if the chain says it is due."""
        try:
            doc = self.backend.signed_result(job_id)
            if doc is None:
                self.done.add(job_id)
                return False
            signed = SignedJobResult.from_json(doc)
            job = read_job(self.escrow, job_id, self.chain.deployment.contract("JobEscrow").block)
            if signed.result.job_id != job_id or signed.signer(self.domain).lower() != job.provider.lower():
                raise JobResultError(f"job {job_id}: the signed result the backend serves is not its provider's")
            if self.chain.address.lower() == job.provider.lower():
                raise NotSlashable(job_id, "it is our own job")
            state = self.escrow.functions.jobState(job_id).call()
            committed = (("0x" + job.output_root.hex(), job.item_count, "0x" + job.result_digest.hex())
                         if job.is_committed else None)
            ground = slash_ground(signed.result, deadline=job.deadline, committed=committed,
                                  cancelled=state.cancelled, already_slashed=state.resultSlashed,
                                  now=self.chain.now())
        except NotSlashable as exc:
            if exc.from_time is not None:
                self._later[job_id] = min(exc.from_time, self.chain.now() + self.recheck_s)
            else:
                self.done.add(job_id)
            logger.info("%s", exc)
            return False
        except (JobResultError, BackendRefused) as exc:
            logger.warning("job %s: signed result not usable: %s", job_id, exc)
            self.done.add(job_id)
            return False
        except (BackendUnavailable, NodeUnavailable) as exc:
            logger.info("job %s: signed result not checked now: %s", job_id, exc)
            return False
        try:
            receipt = self.chain.send(self.escrow.functions.slashSignedResult(
                job.as_tuple(), signed.result.as_tuple(), bytes.fromhex(signed.signature[2:])))
        except TransactionReverted as exc:  # someone slashed first, or the job moved on meanwhile
            logger.info("job %s: slash refused: %s", job_id, exc)
            self.done.add(job_id)
            return False
        self.done.add(job_id)
        event = emitted(self.escrow, "SignedResultSlashed", receipt)[0]["args"]
        logger.warning("job %s: provider %s slashed %s wei with its signed result (%s); renter refunded %s wei, "
                       "tx %s", job_id, job.provider, event["slashed"], ground, event["renterRefund"],
                       receipt["transactionHash"].hex())
        return True


__all__ = ["SignedResultSlasher"]
