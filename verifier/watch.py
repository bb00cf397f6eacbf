"""What the verifier follows on the chain, read once through the shared log follower
(client.log_follower) into its state file: registered providers, the PoG rounds it requested, the
PoG and job challenges it opened, committed jobs to audit, and job disputes to vote on. Each tick reads only the blocks
after the cursor; ids whose story ended are forgotten by the part that follows them, so a tick
costs the same however long the chain."""

from __future__ import annotations

from pathlib import Path

from client.log_follower import Event, events_between
from client.watched_ids import WatchedIds, open_state
from verifier.chain import VerifierChain

PROVIDER, POG_ROUND, POG_CHALLENGE, JOB_CHALLENGE, COMMITTED_JOB, DISPUTE = (
    "provider", "pog-round", "pog-challenge", "job-challenge", "committed-job", "dispute")
EVENTS = {"ProviderRegistry": ["ProviderRegistered"], "ProofOfGpu": ["RoundRequested"],
          "ChallengeManager": ["PogChallenged", "JobChallenged"],
          "JobEscrow": ["ResultCommitted"], "DisputeCommittee": ["DisputeOpened"]}


def watch_chain(chain: VerifierChain, state_db: Path | None) -> WatchedIds:
    """The verifier's ids, kept in `state_db` (None: in memory, read again from the deployment
    block by each new process)."""
    me = chain.address.lower()

    def pick(event: Event) -> tuple[str, object] | None:
        a = event.args
        if event.name == "ProviderRegistered":
            return PROVIDER, a["provider"]
        if event.name == "RoundRequested" and a["verifier"] == me:
            return POG_ROUND, int(a["roundId"])
        if event.name == "PogChallenged" and a["challenger"] == me:
            return POG_CHALLENGE, int(a["challengeId"])
        if event.name == "JobChallenged" and a["challenger"] == me:
            return JOB_CHALLENGE, int(a["challengeId"])
        if event.name == "ResultCommitted":
            return COMMITTED_JOB, int(a["jobId"])
        if event.name == "DisputeOpened":
            return DISPUTE, int(a["disputeId"])
        return None

    return WatchedIds(chain.web3, chain.deployment, open_state(state_db), f"verifier-{me}", EVENTS, pick)


def answer_events(chain: VerifierChain, challenge_id: int) -> list[Event]:
    """The ChallengeAnswered events of one challenge, read from its anchor block (the block that
    opened it) on, so the read is bounded by the challenge's age, not the chain's."""
    anchor = chain.contract("ChallengeManager").functions.challenge(challenge_id).call().anchorBlock
    answers = events_between(chain.web3, chain.deployment, {"ChallengeManager": ["ChallengeAnswered"]}, anchor)
    return [e for e in answers if e.args["challengeId"] == challenge_id]


__all__ = ["answer_events", "watch_chain"]
