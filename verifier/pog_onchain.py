"""Proof-of-GPU rounds with the chain in the loop.

A routine round costs the provider no gas beyond its root commit: the verifier requests the
round on-chain with the hash of a fresh secret, and the seed is that secret mixed with the
request block's hash, so nobody knows it before the verifier reveals the secret. The verifier
computes the seed itself, starts its clock, and only then broadcasts fixSeed and hands the same
secret to the provider: the clock runs before the seed is knowable to anyone but the verifier,
with no block to wait for in between. It times seed-to-root off-chain, challenges the committed
roots with another secret it reveals only after the roots are on-chain, checks the answers
exactly, and attests the verdict on-chain.

When a round fails (a wrong element, a missing or late answer) the verifier escalates to an
on-chain challenge of the failed GPU's root: the provider must then reveal the block-hash-chosen
chunks in a transaction or be slashed, and any wrong revealed element is proven on-chain with a
fraud proof that the contract judges by recomputing the element. A wrong element the provider
already revealed off-chain (behind a valid inclusion proof under its committed root) is proven
at once, in the next transaction after the challenge: the evidence in hand is never thrown away
for a fresh draw. `follow_up` drives a challenge to its end and reports what the contract
decided, read from the transaction's ChallengeClosed event; it is idempotent and resumes from
chain state, so a restarted verifier finishes it. `end_round` ends each of our rounds that the
round itself left open (a silent provider, roots committed but never sent to us), so every
round ends attested, failed or voided. Nothing here waits for a block that only a transaction
would create: waits are polls bounded in wall time too.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from eth_typing import HexStr

from client.errors import NodeUnavailable, TransactionReverted
from client.contracts import Struct, emitted
from protocol.enums import ChallengeStatus, RoundStatus
from protocol.errors import ProtocolError, WrongElement
from protocol.pog.challenge import MIN_K, pog_round_seed, pog_secret_hash
from protocol.pog.check import check_chunk
from protocol.pog.messages import decode_commitment
from verifier import VerifierError
from verifier.cc_attestation import NvAttester
from verifier.chain import VerifierChain
from protocol.pog.profiles import lookup
from protocol.pog.residency import FillParams
from verifier.pog_checker import GpuClaim, PogChecker, RoundVerdict
from verifier.watch import answer_events

if TYPE_CHECKING:
    from web3.contract.contract import ContractFunction

logger = logging.getLogger(__name__)


class ProverLink(Protocol):
    """How the verifier reaches a provider's prover (a Celery task on its queue in production).

    Both calls return the provider's JSON message (protocol.pog.messages). The provider sends its
    commitment the moment it has the roots (that stops the verifier's clock) and posts the same
    roots on-chain itself, before the round's commit deadline.
    """

    def ready(self) -> None:
        """Raises LinkDown when the verifier's own side (its broker) cannot carry a round, so
        that no round is requested, and no provider blamed, for the verifier's failure."""

    def commit(self, round_id: int, secret: bytes, sizes: Sequence[int]) -> bytes:
        """Hands the round's secret to the provider (who derives the seed from it and the
        request block's hash) and returns its commitment message."""

    def answer(self, round_id: int, randomness: bytes, k: int) -> bytes: ...

    def fill(self, round_id: int, shapes: Sequence[FillParams]) -> bytes:
        """Has every device build its residency fill (one shape per GPU); the fill roots."""

    def probe(self, round_id: int, randomness: bytes, q: int) -> bytes:
        """The probe answers of every device for the revealed randomness."""


class ProverUnreachable(VerifierError):
    """The provider did not answer over the link (its failure, judged like a wrong answer)."""


class LinkDown(VerifierError):
    """The verifier's own link is down (broker unreachable): a transient error of ours."""


class SeedNotFixed(VerifierError):
    """Our own fixSeed did not go through: the round ends Voided, nobody is blamed (ours, transient)."""


class ChallengeState(Enum):
    WAITING = "waiting"  # the provider may still answer, or the fraud window is open
    SLASHED_TIMEOUT = "slashed_timeout"  # the contract closed it ProviderFaulted on our timeout claim
    SLASHED_FRAUD = "slashed_fraud"  # ... on our fraud proof
    DISMISSED = "dismissed"  # the contract closed it Dismissed (e.g. that root was already slashed for)
    SETTLED = "settled"  # answered correctly: the provider earned the bond
    CLOSED = "closed"  # already resolved by someone (possibly before a restart)


_WALL_MARGIN_S = 30.0


@dataclass(frozen=True)
class RoundOutcome:
    provider: str
    round_id: int
    verdict: RoundVerdict | None
    challenge_ids: tuple[int, ...]  # on-chain challenges opened for failed GPUs
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict is not None and self.verdict.passed


@dataclass
class OnchainPog:
    chain: VerifierChain
    link: ProverLink | None = None  # needed by run_round only; follow_up works from the chain
    k: int = MIN_K
    dtype: str = "int8"
    n: int | None = None  # None: chosen from each GPU's claimed class (never by the provider)
    bond_wei: int | None = None  # None: the contract's minimum
    answer_window_s: float = 60.0
    poll_s: float = 0.2
    attester: NvAttester | None = None  # None: NvAttester() (this interpreter's SDK, if any)
    # None: rounds of two or more GPUs of a class get that class's residency fill; a shape here
    # is given to every claimed GPU of every round (tests, small fills on CPUs).
    fill: FillParams | None = None

    def __post_init__(self) -> None:
        self.pog = self.chain.contract("ProofOfGpu")
        self.registry = self.chain.contract("ProviderRegistry")
        self.challenges = self.chain.contract("ChallengeManager")

    def run_round(self, provider: str) -> RoundOutcome:
        if self.link is None:
            raise VerifierError("run_round needs a link to the provider's prover")
        claims = self._claims(provider)
        self.link.ready()
        sizes = sorted({c.n for c in claims})
        if len(sizes) != 1:
            raise VerifierError(f"provider {provider} claims GPUs of different classes: {sizes}")
        secret = os.urandom(32)  # revealed by fixSeed below; with the request block's hash, the seed
        receipt = self.chain.send(self.pog.functions.requestRound(provider, sizes[0], pog_secret_hash(secret)))
        round_id = emitted(self.pog, "RoundRequested", receipt)[0]["args"]["roundId"]
        seed = pog_round_seed(bytes(receipt["blockHash"]), secret, round_id, bytes.fromhex(provider[2:]))
        logger.info("PoG round %s for %s: n=%s, seed 0x%s revealed now", round_id, provider, sizes[0], seed.hex())

        checker = PogChecker(k=self.k, dtype=self.dtype, answer_window_s=self.answer_window_s,
                             attester=self.attester)
        checker.open_round(seed, claims)  # the clock starts before the secret leaves this process
        fix_tx = self.chain.broadcast(self.pog.functions.fixSeed(round_id, secret))
        try:
            message = self.link.commit(round_id, secret, [c.n for c in claims])
            checker.receive_commitment(message)  # the clock stops here
            self._seed_fixed(round_id, fix_tx, seed)
            self._wait_committed(round_id)
            self._check_roots_on_chain(round_id, message, len(claims))
            if any(c.fill is not None for c in claims):
                self._residency(checker, round_id, claims)
            randomness = os.urandom(32)  # the verifier's secret, revealed only now
            checker.reveal(randomness)
            verdict = checker.judge(self.link.answer(round_id, randomness, self.k))
        except (LinkDown, NodeUnavailable, SeedNotFixed):
            raise  # our failure, not the provider's: no verdict and no bond
        except (VerifierError, ProtocolError) as exc:
            logger.warning("PoG round %s for %s failed before judging: %s", round_id, provider, exc)
            return self._fail(provider, round_id, None, range(len(claims)), str(exc))

        best = max(verdict.gpus, key=lambda g: g.tflops)
        failed = [g.gpu_index for g in verdict.gpus if not g.passed]
        gpu_class = (verdict.gpus[0].gpu_class or "") if not failed else ""
        self.chain.send(self.pog.functions.attest(
            round_id, int(verdict.seed_to_root_s * 1000), _bytes32(gpu_class),
            int(best.tflops * 1000), not failed))
        # A wrong fill block is the verifier's to judge (the contract knows no fills): the round
        # is attested failed, and only wrong matmul work is taken on-chain.
        failed = [g.gpu_index for g in verdict.gpus if not g.passed and not g.fill_failed]
        if failed:
            return self._escalate(provider, round_id, verdict, failed)
        if not verdict.passed:
            logger.warning("PoG round %s for %s failed its residency probe: %s", round_id, provider,
                           "; ".join(f"GPU {g.gpu_index}: {g.failure}" for g in verdict.gpus if g.failure))
            return RoundOutcome(provider, round_id, verdict, ())
        logger.info("PoG round %s for %s passed: class %s", round_id, provider, gpu_class)
        return RoundOutcome(provider, round_id, verdict, ())

    def follow_up(self, challenge_id: int) -> ChallengeState:
        """Moves an on-chain PoG challenge towards its end: a timeout claim, a fraud proof from
        the revealed chunks, or settlement once the fraud window passed. The state returned is
        what the contract decided."""
        c = self.challenges.functions.challenge(challenge_id).call()
        status, deadline = c.status, c.responseDeadline
        if status == ChallengeStatus.OPEN:
            if self.chain.now() <= deadline:
                return ChallengeState.WAITING
            return self._close(challenge_id, self.challenges.functions.claimTimeout(challenge_id),
                               ChallengeState.SLASHED_TIMEOUT, f"no answer by {deadline}")
        if status != ChallengeStatus.ANSWERED:
            return ChallengeState.CLOSED
        window_end = c.answeredAt + self.challenges.functions.fraudWindow().call()
        window_open = self.chain.now() <= window_end
        fraud = self._find_fraud(challenge_id, c)
        if fraud is not None and window_open:
            index, data, proof, offset = fraud
            return self._close(challenge_id,
                               self.challenges.functions.proveFraud(challenge_id, index, data, proof, offset),
                               ChallengeState.SLASHED_FRAUD, f"wrong element {offset} of chunk {index}")
        if fraud is not None:  # a proof now would only revert, tick after tick: the answer stands
            logger.warning("challenge %s: fraud found after the fraud window closed at %s; settling",
                           challenge_id, window_end)
        if window_open:
            return ChallengeState.WAITING
        return self._close(challenge_id, self.challenges.functions.settle(challenge_id), ChallengeState.SETTLED,
                           "the answer stood")

    def _close(self, challenge_id: int, fn: ContractFunction, expected: ChallengeState, why: str) -> ChallengeState:
        """Sends the closing call and returns what the contract decided (its ChallengeClosed
        event), never what we hoped for; a call someone else beat reads the state back."""
        try:
            receipt = self.chain.send(fn)
        except TransactionReverted as exc:
            status = self.challenges.functions.challenge(challenge_id).call().status
            if status in (ChallengeStatus.OPEN, ChallengeStatus.ANSWERED):
                raise
            logger.info("challenge %s: already closed (status %s): %s", challenge_id, status, exc)
            return ChallengeState.CLOSED
        closed = emitted(self.challenges, "ChallengeClosed", receipt)
        status = closed[0]["args"]["status"] if closed else self.challenges.functions.challenge(challenge_id).call().status
        tx = receipt["transactionHash"].hex()
        if status == ChallengeStatus.DISMISSED:
            logger.warning("challenge %s: %s; the contract dismissed it (nobody slashed), tx %s", challenge_id, why, tx)
            return ChallengeState.DISMISSED
        if expected is not ChallengeState.SETTLED and status != ChallengeStatus.PROVIDER_FAULTED:
            raise VerifierError(f"challenge {challenge_id}: contract closed it with status {status}, tx {tx}")
        logger.info("challenge %s: %s; contract decided %s, tx %s", challenge_id, why, expected.value, tx)
        return expected

    def _claims(self, provider: str) -> list[GpuClaim]:
        registered = self.registry.functions.providerOf(provider).call()
        if not registered.registeredAt:
            raise VerifierError(f"provider {provider} is not registered")
        model = registered.gpuModel.rstrip(b"\0").decode(errors="replace")
        fill = self.fill
        profile = lookup(model)
        # One device needs no residency to be counted, but an attestable class's single device
        # gets a fill too: attestation names the chip family (GH100), and the fill sized to the
        # claimed class's memory is what tells an H200 from an H100 posing as one.
        if fill is None and profile is not None and not profile.is_cpu \
                and (len(registered.uuidHashes) > 1 or profile.attestable):
            fill = PogChecker.fill_for(model)
        return [PogChecker.claim(uuid, model, self.n, self.dtype, fill=fill)
                for uuid in registered.uuidHashes]

    def _residency(self, checker: PogChecker, round_id: int, claims: Sequence[GpuClaim]) -> None:
        """Every device's fill root, then the concurrent probe; a prover that cannot take part
        (no fill, no answer) has no device resident, its matmul work still judged."""
        link = self.link
        if link is None:
            raise VerifierError("a residency probe needs a link to the provider's prover")
        try:
            checker.receive_fills(link.fill(round_id, [c.fill for c in claims if c.fill]))
            randomness = os.urandom(32)
            checker.probe(randomness)  # the probe's clock starts
            checker.judge_probes(link.probe(round_id, randomness, checker.probes))
        except ProverUnreachable as exc:
            logger.warning("PoG round %s: residency probe not answered: %s", round_id, exc)
            checker.skip_residency(str(exc))

    def _seed_fixed(self, round_id: int, fix_tx: bytes, seed: bytes) -> None:
        """Our fixSeed is mined and fixed the seed we timed from (else the round is ours to lose)."""
        try:
            self.chain.mined(fix_tx, f"fixSeed round {round_id}")
        except TransactionReverted as exc:
            raise SeedNotFixed(f"round {round_id}: {exc}") from exc
        if self.pog.functions.round(round_id).call().seed != seed:
            raise SeedNotFixed(f"round {round_id}: the seed on-chain is not the one we computed")

    def _wait_committed(self, round_id: int) -> None:
        """Polls for the roots until the commit deadline, by chain time or, on a chain that makes
        blocks only for transactions, by wall time (commit window plus a margin)."""
        deadline = self.pog.functions.round(round_id).call().commitDeadline
        give_up = time.monotonic() + self.pog.functions.commitWindow().call() + _WALL_MARGIN_S
        while self.pog.functions.round(round_id).call().status == RoundStatus.REQUESTED:
            if self.chain.now() > deadline or time.monotonic() > give_up:
                raise ProverUnreachable(f"round {round_id}: no roots on-chain by the commit deadline {deadline}")
            time.sleep(self.poll_s)

    def _check_roots_on_chain(self, round_id: int, message: bytes, gpu_count: int) -> None:
        """The roots the prover sent must be the ones it committed on-chain (which bind it)."""
        sent = decode_commitment(message, gpu_count)
        for g in sent.gpus:
            on_chain = self.pog.functions.rootOf(round_id, g.gpu_index).call()
            if on_chain != g.root:
                raise VerifierError(f"round {round_id} GPU {g.gpu_index}: root sent off-chain differs from the committed one")

    def _fail(self, provider: str, round_id: int, verdict: RoundVerdict | None,
              gpus: Sequence[int], detail: str) -> RoundOutcome:
        r = self.pog.functions.round(round_id).call()
        if r.status == RoundStatus.COMMITTED:  # attest the failure, then make the roots answer on-chain
            self.chain.send(self.pog.functions.attest(round_id, 0, _bytes32(""), 0, False))
            return self._escalate(provider, round_id, verdict, gpus, detail)
        # Nothing committed: the round fails at its commit deadline, now if that passed, else
        # at a later end_round (the service's sweep of our open rounds).
        self.end_round(round_id)
        return RoundOutcome(provider, round_id, verdict, (), detail)

    def end_round(self, round_id: int) -> RoundStatus | None:
        """Ends one of our rounds that its own run left open, once the contract allows it: still
        waiting for roots after the commit deadline -> markFailed (Failed, or Voided without a
        seed); roots committed but never attested (they never reached us, so we cannot vouch for
        them) -> attested failed and challenged while the challenge period runs, else voided.
        Returns the round's status when it is final, None while it must wait."""
        r = self.pog.functions.round(round_id).call()
        if r.status in (RoundStatus.ATTESTED, RoundStatus.FAILED, RoundStatus.VOIDED):
            return RoundStatus(r.status)
        if r.verifier.lower() != self.chain.address.lower():
            raise VerifierError(f"round {round_id} belongs to verifier {r.verifier}, not us")
        now = self.chain.now()
        if r.status == RoundStatus.REQUESTED:
            if now <= r.commitDeadline:
                return None
            return self._mark_failed(round_id)
        period = self.pog.functions.rootChallengePeriod().call()
        if now > r.committedAt + period:  # too late to challenge: only voiding is left
            return self._mark_failed(round_id)
        logger.warning("PoG round %s: roots committed by %s but never sent to us; attested failed", round_id,
                       r.provider)
        self._fail(r.provider, round_id, None, range(r.gpuCount), "roots committed on-chain but not sent to the verifier")
        return RoundStatus.ATTESTED

    def _mark_failed(self, round_id: int) -> RoundStatus | None:
        try:
            receipt = self.chain.send(self.pog.functions.markFailed(round_id))
        except TransactionReverted as exc:  # the chain's clock is behind ours, or someone ended it first
            logger.info("PoG round %s: not ended yet: %s", round_id, exc)
            status = self.pog.functions.round(round_id).call().status
            return RoundStatus(status) if status >= RoundStatus.ATTESTED else None
        status = RoundStatus(self.pog.functions.round(round_id).call().status)
        logger.info("PoG round %s ended %s, tx %s", round_id, status.name, receipt["transactionHash"].hex())
        return status

    def _escalate(self, provider: str, round_id: int, verdict: RoundVerdict | None,
                  gpus: Sequence[int], detail: str = "") -> RoundOutcome:
        bond = self.bond_wei or self.challenges.functions.minBond().call()
        ids = []
        for g in gpus:
            receipt = self.chain.send(self.challenges.functions.challengePog(round_id, g, self.k), value=bond)
            ids.append(emitted(self.challenges, "PogChallenged", receipt)[0]["args"]["challengeId"])
        evidence = {g.gpu_index: g.evidence for g in verdict.gpus if g.evidence} if verdict else {}
        for g, challenge_id in zip(gpus, ids):
            if g in evidence:  # a wrong element already in hand: proven now, whatever the draw
                index, data, siblings, offset = evidence[g]
                try:
                    self._close(challenge_id, self.challenges.functions.proveFraud(
                        challenge_id, index, data, list(siblings), offset),
                        ChallengeState.SLASHED_FRAUD, f"wrong element {offset} of chunk {index}, revealed off-chain")
                except TransactionReverted as exc:  # the challenge still runs its ordinary course
                    logger.warning("challenge %s: off-chain evidence refused: %s", challenge_id, exc)
        if verdict is not None and not detail:
            detail = "; ".join(f"GPU {g.gpu_index}: {g.failure}" for g in verdict.gpus if not g.passed)
        logger.warning("PoG round %s for %s failed (%s); on-chain challenges %s", round_id, provider, detail, ids)
        return RoundOutcome(provider, round_id, verdict, tuple(ids), detail)

    def _find_fraud(self, challenge_id: int, c: Struct) -> tuple[int, bytes, list[bytes], int] | None:
        """A wrong element among the chunks the provider revealed on-chain, if any."""
        round_id, gpu_index, root = c.subject, c.gpuIndex, c.root
        n = self.pog.functions.round(round_id).call().n
        seed = self.pog.functions.gpuSeedOf(round_id, gpu_index).call()
        leaves, proofs = self._revealed(challenge_id)
        indices = self.challenges.functions.challengeIndices(challenge_id).call()
        for index, data, proof in zip(indices, leaves, proofs):
            try:
                check_chunk(seed, n, root, index, data, proof)
            except WrongElement as wrong:
                return index, data, list(proof), wrong.offset
        return None

    def _revealed(self, challenge_id: int) -> tuple[list[bytes], list[list[bytes]]]:
        """The answer's leaves and proofs, read back from the respond transaction's calldata."""
        answers = answer_events(self.chain, challenge_id)
        if not answers:
            raise VerifierError(f"challenge {challenge_id} is answered but its answer event is missing")
        tx = self.chain.web3.eth.get_transaction(HexStr(answers[-1].tx_hash))
        _, args = self.challenges.decode_function_input(tx["input"])
        return list(args["leaves"]), [list(p) for p in args["proofs"]]


def _bytes32(text: str) -> bytes:
    return text.encode()[:32].ljust(32, b"\0")
