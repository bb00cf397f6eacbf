"""Which committed jobs a verifier must audit: each with a published least probability, drawn secretly.

A verifier on a busy market cannot always re-execute every job inside its challenge window. What
keeps a provider honest is not that every job is audited but that cheating on any job loses in
expectation (docs/PROTOCOL.md, "Audit probability"): a cheat gains at most the job's price (it is
paid without computing); audited with probability p and caught with probability d (sampling), it
loses the price and a job challenge's slash S. So cheating is a loss once p * d * (S + price) >=
price, and `audit_floor` is that p times a safety factor, capped at 1.

Which jobs are drawn must be unknown to providers until the audit comes: the draw of a job is a
hash of a secret only this verifier can compute (a signature of a fixed text with its own key:
deterministic, so a restart draws the same jobs) with the escrow's address and the job id. A job
whose draw falls below its floor must be audited; the others are audited only with capacity left
over (JobAuditor), so a quiet market still audits everything.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_account.messages import encode_defunct
from eth_utils import keccak

from verifier import VerifierError
from verifier.sampling import sample_size

DRAW_TEXT = "Unchained verifier: audit draw secret (sign only in the verifier)"
SAFETY = 2.0  # floors are twice the break-even probability


def detection_probability(item_count: int, corrupted: float = 0.10, confidence: float = 0.99) -> float:
    """Probability that an audit's sample catches a provider that corrupted a `corrupted` fraction
    of the items: 1 when the sample covers every item, else 1 - (1 - corrupted)^k."""
    k = sample_size(item_count, corrupted, confidence)
    return 1.0 if k >= item_count else 1.0 - (1.0 - corrupted) ** k


def audit_floor(price_wei: int, slash_wei: int, detection: float, safety: float = SAFETY) -> float:
    """The least probability at which a job of `price_wei` must be audited so that cheating on it
    loses in expectation: safety * price / (detection * (slash + price)), at most 1."""
    if price_wei < 0 or slash_wei < 0:
        raise VerifierError("price and slash are never negative")
    if not 0 < detection <= 1 or safety < 1:
        raise VerifierError("detection lies in (0, 1] and the safety factor is at least 1")
    if price_wei == 0:
        return 0.0
    return min(1.0, safety * price_wei / (detection * (slash_wei + price_wei)))


@dataclass(frozen=True)
class AuditDraw:
    """A verifier's secret draws over jobs and the floors they are compared with."""

    secret: bytes
    slash_wei: int
    corrupted: float = 0.10
    confidence: float = 0.99
    safety: float = SAFETY

    @classmethod
    def for_account(cls, account, slash_wei: int, **policy: float) -> AuditDraw:  # type: ignore[no-untyped-def]
        """The draw of the verifier holding `account` (an eth-account LocalAccount)."""
        signature = account.sign_message(encode_defunct(text=DRAW_TEXT)).signature
        return cls(keccak(bytes(signature)), slash_wei, **policy)

    def draw(self, escrow: str, job_id: int) -> float:
        """The job's draw, uniform in [0, 1) to anyone without the secret."""
        word = keccak(self.secret + bytes.fromhex(escrow[2:].lower()) + job_id.to_bytes(32, "big"))
        return int.from_bytes(word[:8], "big") / 2**64

    def floor(self, price_wei: int, item_count: int) -> float:
        return audit_floor(price_wei, self.slash_wei,
                           detection_probability(item_count, self.corrupted, self.confidence), self.safety)

    def must_audit(self, escrow: str, job_id: int, price_wei: int, item_count: int) -> bool:
        return self.draw(escrow, job_id) < self.floor(price_wei, item_count)


__all__ = ["AuditDraw", "audit_floor", "detection_probability"]
