"""Every custom error of every packaged contract as one line a person reads: what it means for
them and what to do. The decoded `Name(args)` is for developers (--debug), never the line shown.

One table (SENTENCES), keyed by error name; each entry reads the error's arguments by the names
the ABIs give them (tests/cli/test_revert_sentences.py checks both against the artifacts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eth_utils import keccak

Sentence = Callable[[dict[str, Any]], str]

# The roles the contracts grant once, at wiring (AccessControl names a role by its hash).
_ROLE_NAMES = {keccak(text=name): name for name in (
    "OPENER_ROLE", "DISPUTE_ROLE", "POG_ROLE", "SLASHER_ROLE", "LOCKER_ROLE")}


def _eth(wei: Any) -> str:
    from client.units import eth

    return eth(int(wei))


def _utc(unix_time: Any) -> str:
    from client.units import iso

    return iso(int(unix_time))


def _span(seconds: Any) -> str:
    from client.units import duration

    return duration(int(seconds))


def _percent(bps: Any) -> str:
    return f"{int(bps) / 100:g}%"


def _hex(value: Any) -> str:
    return "0x" + bytes(value).hex()


def _role(role: Any) -> str:
    return _ROLE_NAMES.get(bytes(role), "DEFAULT_ADMIN_ROLE" if not any(bytes(role)) else _hex(role))


def _deployed(what: str) -> str:
    """A constructor's refusal: only whoever deploys the contracts can meet it."""
    return (f"the contracts were deployed with {what}: a deployment/configuration problem for this "
            "network's operator, nothing a user can change")


def _payment_refused(a: dict[str, Any]) -> str:
    """A withdrawal whose payee reverted: the contract restores the balance (PullBalances)."""
    return (f"paying {_eth(a['amount'])} to {a['to']} failed: that address refuses ETH (a contract that "
            "cannot receive it); the balance stays owed to it, and only an address that can receive ETH "
            "can withdraw it")


def _wired_only(a: dict[str, Any], who: str) -> str:
    return (f"{a['caller']} is not {who}: only that contract may call this (if a service did, the deployment "
            "is mis-wired: a problem for the operator)")


def _challenge_status(challenge_id: int, status: int) -> str:
    """Why a challenge in `status` cannot take the step asked (escalate, settle, answer)."""
    from protocol.enums import ChallengeStatus

    try:
        name = ChallengeStatus(status)
    except ValueError:
        return f"challenge {challenge_id} is not in a state for that (status {status})"
    if name is ChallengeStatus.OPEN:
        return (f"challenge {challenge_id} is not answered yet: the provider has until its response deadline; "
                "if it never answers it is slashed (claim the timeout), else escalate after its answer")
    if name is ChallengeStatus.ESCALATED:
        return f"challenge {challenge_id} is escalated already: the committee's vote decides it"
    if name is ChallengeStatus.ANSWERED:
        return f"challenge {challenge_id} is answered: its escalation window is running"
    return f"challenge {challenge_id} is closed ({name.name.lower().replace('_', ' ')}): nothing left to do on it"


def _round_status(round_id: int, status: int) -> str:
    """Why a Proof-of-GPU round in `status` cannot take the step asked (seed, commit, attest, fail)."""
    from protocol.enums import RoundStatus

    try:
        name = RoundStatus(status)
    except ValueError:
        return f"Proof-of-GPU round {round_id} is not in a state for that (status {status})"
    if name is RoundStatus.REQUESTED:
        return f"Proof-of-GPU round {round_id} has no committed roots yet: wait for the provider's commit"
    if name is RoundStatus.COMMITTED:
        return f"Proof-of-GPU round {round_id}'s roots are committed already: it waits for its verifier's attestation"
    return f"Proof-of-GPU round {round_id} is over ({name.name.lower()}): nothing left to do on it"


_BAD_N = "it must be a multiple of 64 from 64 to 65536"

SENTENCES: dict[str, Sentence] = {
    # OpenZeppelin libraries (roles, signatures, tokens, short strings).
    "AccessControlBadConfirmation": lambda a: (
        "an account may renounce only its own role: the confirmation must be the caller's own address"),
    "AccessControlUnauthorizedAccount": lambda a: (
        f"{a['account']} lacks the {_role(a['neededRole'])} role this call needs: only the contracts wired "
        "for it may call it (if a service did, the deployment is mis-wired: a problem for the operator)"),
    "ECDSAInvalidSignature": lambda a: "the signature is invalid: it recovers no signer (corrupted or forged)",
    "ECDSAInvalidSignatureLength": lambda a: (
        f"the signature is {a['length']} bytes long, not 65: it is corrupted or cut short"),
    "ECDSAInvalidSignatureS": lambda a: (
        f"the signature is malformed (its s value {_hex(a['s'])} is out of range): have it signed again"),
    "ERC20InsufficientAllowance": lambda a: (
        f"the token allowance of {a['spender']} is {a['allowance']}, not the {a['needed']} needed (in the "
        "token's smallest unit): approve that amount for it first"),
    "ERC20InsufficientBalance": lambda a: (
        f"{a['sender']} holds {a['balance']} of the token, not the {a['needed']} needed (in the token's "
        "smallest unit): top it up or pay less"),
    "ERC20InvalidApprover": lambda a: f"the token refuses an approval from {a['approver']} (the zero address)",
    "ERC20InvalidReceiver": lambda a: f"the token refuses to send to {a['receiver']} (the zero address)",
    "ERC20InvalidSender": lambda a: f"the token refuses a transfer from {a['sender']} (the zero address)",
    "ERC20InvalidSpender": lambda a: f"the token refuses an approval for {a['spender']} (the zero address)",
    "SafeERC20FailedOperation": lambda a: (
        f"the token {a['token']} refused the transfer: check the token balance and allowance, and that "
        "it is an ERC-20 token"),
    "InvalidShortString": lambda a: "a contract's stored short text is malformed: a contract bug, nothing a user can fix",
    "StringTooLong": lambda a: (
        f"the text {a['str']!r} is longer than a short string holds (31 bytes): a deployment problem for the operator"),
    # Libraries and test contracts of this project.
    "BlockRandomnessNotYetAvailable": lambda a: (
        f"the seed comes from the hash of block {a['targetBlock']}, not readable yet in block "
        f"{a['currentBlock']}: wait a block and try again"),
    "BlockRandomnessExpired": lambda a: (
        f"the seed comes from the hash of block {a['targetBlock']}, more than 256 blocks before block "
        f"{a['currentBlock']}: its hash can no longer be read, so that step can no longer be taken"),
    "PogMathBadChunkLength": lambda a: f"a chunk of {a['length']} bytes: a Proof-of-GPU chunk is 256 bytes",
    "PogMathBadElementOffset": lambda a: f"element {a['offset']} is out of range: a chunk holds elements 0 to 63",
    "PogMathBadN": lambda a: f"matrix size {a['n']} is invalid: {_BAD_N}",
    "PogMathIndexOutOfRange": lambda a: f"element ({a['i']}, {a['j']}) lies outside the {a['n']}x{a['n']} matrix",
    "ReentrantWithdrawerRejected": lambda a: (
        "the recipient, a contract used only by the tests, refuses payments on purpose"),
    # One-time wiring (deployment).
    "WiringAlreadyDone": lambda a: (
        "the contracts are wired already: the one-time wiring step of a deployment cannot run twice"),
    "WiringNotDeployer": lambda a: (
        f"{a['caller']} did not deploy this contract: only its deployer may wire it (a deployment step "
        "for the operator)"),
    "WiringTooManyHolders": lambda a: (
        f"the wiring names {a['count']} contracts for one role, at most {a['max']} are allowed: a deployment "
        "problem for the operator"),
    "WiringZeroAddress": lambda a: (
        "the wiring names a zero address: a deployment problem for the operator (check the deployed addresses)"),
    # ChallengeManager.
    "ChallengeJobNotChallengeable": lambda a: (
        f"job {a['jobId']} cannot be challenged now: only a committed job inside its challenge window can "
        f"(`unchained job status {a['jobId']}` shows its status and window)"),
    "ChallengeJobAlreadyChallenged": lambda a: (
        f"job {a['jobId']} is already challenged (challenge {a['challengeId']}): wait for its outcome "
        f"(`unchained job status {a['jobId']}`)"),
    "ChallengeNotStakedVerifier": lambda a: (
        f"not your job: only its renter, or a verifier with at least {_eth(a['required'])} staked "
        f"({a['challenger']} has {_eth(a['stake'])}), may challenge it"),
    "ChallengeSelfChallenge": lambda a: "you are this job's provider: a provider cannot challenge its own work",
    "ChallengeBondTooSmall": lambda a: (
        f"the bond {_eth(a['bond'])} is below the minimum {_eth(a['minBond'])}: raise --bond, or leave it out "
        "to pay the minimum"),
    "ChallengeBadK": lambda a: f"--k {a['k']} is out of range: ask for between 1 and 64 items",
    "ChallengeNotChallenger": lambda a: f"challenge {a['challengeId']} is not yours: only its challenger may do that",
    "ChallengeUnknown": lambda a: f"challenge {a['challengeId']} does not exist",
    "ChallengeWrongStatus": lambda a: _challenge_status(a["challengeId"], int(a["status"])),
    "ChallengeWrongKind": lambda a: (
        f"challenge {a['challengeId']} is a Proof-of-GPU challenge: only a job challenge goes to the committee"),
    "ChallengeWindowClosed": lambda a: (
        f"challenge {a['challengeId']}'s window closed at {_utc(a['windowEnd'])}: too late for that"),
    "ChallengeWindowOpen": lambda a: (
        f"challenge {a['challengeId']}'s window is open until {_utc(a['windowEnd'])}: try again after it"),
    "ChallengeDeadlineNotPassed": lambda a: (
        f"challenge {a['challengeId']}'s provider may answer until {_utc(a['deadline'])}: wait for it"),
    "ChallengeDeadlinePassed": lambda a: (
        f"challenge {a['challengeId']}'s answer was due by {_utc(a['deadline'])}: too late"),
    "ChallengeNothingOwed": lambda a: "the challenge manager owes you nothing (`unchained balance` lists what is owed)",
    "ChallengeNotProvider": lambda a: (
        f"{a['caller']} is not the provider challenged in challenge {a['challengeId']}: only that provider "
        "may answer it"),
    "ChallengeWrongAnswerCount": lambda a: (
        f"challenge {a['challengeId']} asks for {a['k']} items, but the answer gives {a['leaves']} item(s) "
        f"and {a['proofs']} proof(s): answer with exactly {a['k']} of each"),
    "ChallengeBadLeafLength": lambda a: (
        f"answer item {a['t']} is {a['length']} bytes, not the {a['expected']} bytes an item has: the answer is "
        "malformed (a provider-software problem)"),
    "ChallengeInvalidProof": lambda a: (
        f"proof {a['t']} (for leaf {a['index']}) does not match the committed root: that data is not what "
        "was committed"),
    "ChallengeChunkOutOfRange": lambda a: (
        f"there is no chunk {a['chunkIndex']}: the committed result has {a['leafCount']} chunk(s), numbered from 0"),
    "ChallengeNoFraud": lambda a: (
        f"element {a['elementOffset']} of chunk {a['chunkIndex']} ({a['value']}) is correct: there is no "
        "fraud to prove there"),
    "ChallengeRoundNotChallengeable": lambda a: (
        f"Proof-of-GPU round {a['roundId']} cannot be challenged: its roots are not committed, or its "
        "challenge period is over"),
    "ChallengeRootFaulted": lambda a: (
        f"GPU {a['gpuIndex']}'s root in Proof-of-GPU round {a['roundId']} is proven wrong already: nothing "
        "left to challenge there"),
    "ChallengeNotCommittee": lambda a: _wired_only(a, "the dispute committee"),
    "ChallengeTransferFailed": _payment_refused,
    "ChallengeZeroAddress": lambda a: _deployed(
        "a zero address for one of the challenge manager's contracts or its treasury"),
    "ChallengeBadFeeBps": lambda a: _deployed(f"a challenge fee of {_percent(a['feeBps'])}, above the 10% limit"),
    "ChallengeZeroWindow": lambda a: _deployed("a challenge window of zero seconds"),
    "ChallengeWindowsExceedUnbonding": lambda a: _deployed(
        f"challenge windows lasting {_span(a['exposure'])} in all, not shorter than the unbonding delay "
        f"({_span(a['unbondingDelay'])}), so a provider could leave before a challenge ends"),
    # DisputeCommittee.
    "DisputeCommitteeUnknownDispute": lambda a: f"dispute {a['disputeId']} does not exist",
    "DisputeCommitteeAlreadyResolved": lambda a: f"dispute {a['disputeId']} is resolved already: nothing left to do on it",
    "DisputeCommitteeAlreadyVoted": lambda a: (
        f"{a['voter']} has voted on dispute {a['disputeId']} already: one vote per account"),
    "DisputeCommitteePartyCannotVote": lambda a: (
        f"{a['voter']} is a party to dispute {a['disputeId']} (its challenger or provider): parties cannot vote on it"),
    "DisputeCommitteeVoteClosed": lambda a: (
        f"voting on dispute {a['disputeId']} closed at {_utc(a['voteEnd'])}: too late to vote; it can be resolved now"),
    "DisputeCommitteeVoteStillOpen": lambda a: (
        f"voting on dispute {a['disputeId']} is open until {_utc(a['voteEnd'])}: it can be resolved after that"),
    "DisputeCommitteeVoterNotStaked": lambda a: (
        f"{a['voter']} has {_eth(a['stake'])} staked: voting needs at least {_eth(a['required'])} (and more "
        "than zero); stake more to vote"),
    "DisputeCommitteeZeroAddress": lambda a: _deployed("a zero address for the dispute committee's staking contract"),
    "DisputeCommitteeInvalidVoteWindow": lambda a: _deployed(
        f"a vote window of {_span(a['voteWindow'])}, outside 1 s to {_span(a['maxVoteWindow'])}"),
    # JobEscrow.
    "JobEscrowUnknownJob": lambda a: f"job {a['jobId']} does not exist (`unchained job list` shows yours)",
    "JobEscrowNotRenter": lambda a: f"not your job: {a['caller']} is not its renter (`unchained job list` shows yours)",
    "JobEscrowFrozen": lambda a: (
        f"job {a['jobId']} is frozen by an open challenge: wait for its outcome (`unchained job status {a['jobId']}`)"),
    "JobEscrowWrongStatus": lambda a: (
        f"job {a['jobId']} is past that step (`unchained job status {a['jobId']}` shows where it is)"),
    "JobEscrowDeadlineNotPassed": lambda a: (
        f"job {a['jobId']} is not refundable before its deadline ({_utc(a['deadline'])})"),
    "JobEscrowWindowOpen": lambda a: (
        f"job {a['jobId']}'s challenge window is open until {_utc(a['challengeWindowEnd'])}: try again after it"),
    "JobEscrowWindowClosed": lambda a: (
        f"job {a['jobId']}'s challenge window closed at {_utc(a['challengeWindowEnd'])}: too late"),
    "JobEscrowCancelTooEarly": lambda a: (
        f"job {a['jobId']} can be cancelled from {_utc(a['cancellableAt'])} on: run the command again then"),
    "JobEscrowNothingOwed": lambda a: "the escrow owes you nothing (`unchained balance` lists what is owed)",
    "JobEscrowProviderInactive": lambda a: (
        f"provider {a['provider']} is not active: pick another (`unchained job submit` without --provider)"),
    "JobEscrowProviderNotBonded": lambda a: (
        f"provider {a['provider']} has no stake bonded for new jobs (too little, or some is unbonding): "
        "pick another provider"),
    "JobEscrowZeroPrice": lambda a: "a job must have a price above zero",
    "JobEscrowPriceTooLarge": lambda a: (
        f"the price {a['price']} (in wei, or the token's smallest unit) is above the escrow's limit of "
        f"{2**80 - 1}: ask for less"),
    "JobEscrowWrongValue": lambda a: (
        f"{_eth(a['sent'])} was sent, but the job costs exactly {_eth(a['price'])}: send the price"),
    "JobEscrowZeroToken": lambda a: "no token was named (the zero address): name the token to pay with, or pay in ETH",
    "JobEscrowDeadlineInPast": lambda a: f"the deadline {_utc(a['deadline'])} is past already: give a later one",
    "JobEscrowDeadlineTooFar": lambda a: (
        f"the deadline {_utc(a['deadline'])} is too far away: the latest allowed now is {_utc(a['latest'])}"),
    "JobEscrowDeadlinePassed": lambda a: (
        f"job {a['jobId']}'s deadline passed at {_utc(a['deadline'])}: too late to commit its result or to "
        "request its cancel; its renter can claim the refund instead"),
    "JobEscrowCancelAlreadyRequested": lambda a: (
        f"a cancel of job {a['jobId']} is requested already: it can be cancelled from "
        f"{_utc(a['cancellableAt'])} on"),
    "JobEscrowCancelNotRequested": lambda a: (
        f"job {a['jobId']} has no cancel request: request the cancel first, then cancel after its grace period"),
    "JobEscrowJobMismatch": lambda a: (
        f"the details sent for job {a['jobId']} are not the ones the escrow recorded for it (or the signed "
        "result is for another job): read them from the chain again and retry"),
    "JobEscrowNotProvider": lambda a: (
        f"{a['caller']} is not this job's provider: only its provider may commit its result or fail it"),
    "JobEscrowEmptyResult": lambda a: (
        "a result without an output root or with zero items cannot be committed (a provider-software problem)"),
    "JobEscrowItemCountTooLarge": lambda a: (
        f"a result of {a['itemCount']} items is more than the escrow records (at most {2**32 - 1}): a "
        "provider-software problem"),
    "JobEscrowBadBatchSize": lambda a: (
        f"a batch of {a['length']} jobs: a batch holds 1 to {a['maxLength']}; send it in parts"),
    "JobEscrowBatchLengthMismatch": lambda a: (
        "the batch's lists (output roots, item counts, result digests) are not as long as its list of jobs "
        "(a provider-software problem)"),
    "JobEscrowReasonTooLong": lambda a: (
        f"the failure reason is {a['length']} bytes, at most {a['maxLength']} are kept: shorten it"),
    "JobEscrowNotFrozen": lambda a: (
        f"job {a['jobId']} is not frozen by a challenge: there is no freeze to resolve"),
    "JobEscrowResultAlreadySlashed": lambda a: (
        f"job {a['jobId']}'s provider was slashed for its signed result already: that happens once"),
    "JobEscrowNotProviderSignature": lambda a: (
        f"the signed result for job {a['jobId']} was signed by {a['signer']}, not by the job's provider: "
        "it proves nothing against the provider"),
    "JobEscrowResultMatchesCommit": lambda a: (
        f"job {a['jobId']}'s committed result is the one its provider signed: no breach, nothing to slash"),
    "JobEscrowJobCancelled": lambda a: (
        f"job {a['jobId']} was cancelled before any commit: its provider's signed result no longer binds it"),
    "JobEscrowResultNotBinding": lambda a: (
        f"the provider's signed result for job {a['jobId']} promised no commit before the deadline (commit by "
        f"{_utc(a['commitBy'])}, deadline {_utc(a['deadline'])}): a missing commit breaks no promise, nothing to slash"),
    "JobEscrowTransferFailed": _payment_refused,
    "JobEscrowNotRegistry": lambda a: _wired_only(a, "the provider registry"),
    "JobEscrowNotStaking": lambda a: _wired_only(a, "the staking contract"),
    "JobEscrowZeroAddress": lambda a: _deployed("a zero address for the escrow's provider registry or treasury"),
    "JobEscrowInvalidFee": lambda a: _deployed(f"a protocol fee of {_percent(a['bps'])}, above the 10% limit"),
    "JobEscrowInvalidWindow": lambda a: _deployed(
        f"a job challenge window of {_span(a['window'])}, outside 1 s to 7 days"),
    "JobEscrowInvalidMaxDuration": lambda a: _deployed(
        f"a longest job of {_span(a['maxJobDuration'])}, outside 1 s to 30 days"),
    "JobEscrowInvalidCancelGrace": lambda a: _deployed(
        f"a cancel grace period of {_span(a['cancelGrace'])}, outside 1 s to 1 day"),
    "JobEscrowUnbondingTooShort": lambda a: _deployed(
        f"an unbonding delay of {_span(a['unbondingDelay'])}, shorter than the longest job plus its challenge "
        f"window ({_span(a['needed'])})"),
    # LeaseManager.
    "LeaseManagerUnknownLease": lambda a: f"lease {a['leaseId']} does not exist (`unchained lease list` shows yours)",
    "LeaseManagerNotActive": lambda a: (
        f"lease {a['leaseId']} has ended: nothing left to do on it (`unchained lease status {a['leaseId']}`)"),
    "LeaseManagerNotRenter": lambda a: (
        f"not your lease: only its renter may end it before {_utc(a['endsAt'])}"),
    "LeaseManagerNotLeaseRenter": lambda a: f"not your lease: its renter is {a['renter']}",
    "LeaseManagerAccessNotOffered": lambda a: (
        f"lease {a['leaseId']} has not been offered yet: wait for the provider (`unchained lease status {a['leaseId']}`)"),
    "LeaseManagerAlreadyConfirmed": lambda a: f"lease {a['leaseId']}'s delivery is confirmed already",
    "LeaseManagerProviderInactive": lambda a: f"provider {a['provider']} is not active: pick another provider",
    "LeaseManagerNotEnoughGpus": lambda a: (
        f"provider {a['provider']} has {a['available']} GPU(s) free, not {a['requested']}: ask for fewer with --gpus"),
    "LeaseManagerDurationTooLong": lambda a: (
        f"a lease lasts at most {int(a['maxDuration']) / 3600:g} hours: lower --hours"),
    "LeaseManagerNothingOwed": lambda a: "the lease manager owes you nothing",
    "LeaseManagerZeroGpuCount": lambda a: "a lease needs at least one GPU: ask for one or more",
    "LeaseManagerZeroDuration": lambda a: "a lease must last longer than zero seconds: give it a duration",
    "LeaseManagerZeroPrice": lambda a: (
        "this lease would cost nothing (the provider's price is zero, or the lease too short): ask for more "
        "hours or GPUs, or pick another provider"),
    "LeaseManagerWrongValue": lambda a: (
        f"{_eth(a['sent'])} was sent, but the lease costs exactly {_eth(a['price'])}: send the price"),
    "LeaseManagerNotProvider": lambda a: (
        f"{a['caller']} is not this lease's provider ({a['provider']}): only it may offer access"),
    "LeaseManagerZeroAccessHash": lambda a: "an empty access hash cannot be offered (a provider-software problem)",
    "LeaseManagerAlreadyOffered": lambda a: f"access to lease {a['leaseId']} is offered already: it is offered once",
    "LeaseManagerDeliveryWindowClosed": lambda a: (
        f"the time to offer access to lease {a['leaseId']} ended at {_utc(a['deadline'])}: too late"),
    "LeaseManagerAccessMismatch": lambda a: (
        f"the access confirmed for lease {a['leaseId']} is not the one its provider offered: confirm the "
        "access details exactly as received"),
    "LeaseManagerTransferFailed": _payment_refused,
    # ProofOfGpu.
    "ProofOfGpuUnknownRound": lambda a: f"Proof-of-GPU round {a['roundId']} does not exist",
    "ProofOfGpuWrongStatus": lambda a: _round_status(a["roundId"], int(a["status"])),
    "ProofOfGpuVerifierNotStaked": lambda a: (
        f"{a['verifier']} has {_eth(a['stake'])} staked: requesting a round needs at least "
        f"{_eth(a['required'])}; stake more"),
    "ProofOfGpuSelfRequest": lambda a: f"{a['provider']} cannot request a Proof-of-GPU round on itself",
    "ProofOfGpuBadN": lambda a: f"matrix size {a['n']} is invalid: {_BAD_N}",
    "ProofOfGpuZeroSecretHash": lambda a: "an empty (zero) secret hash: a round needs the hash of the verifier's secret",
    "ProofOfGpuProviderNotActive": lambda a: f"provider {a['provider']} is not active: only an active provider is tested",
    "ProofOfGpuBadGpuCount": lambda a: (
        f"provider {a['provider']} has {a['gpuCount']} GPU(s) registered: a round tests 1 to 255"),
    "ProofOfGpuNotVerifier": lambda a: (
        f"{a['caller']} is not round {a['roundId']}'s verifier: only the verifier that requested it may do that"),
    "ProofOfGpuNotProvider": lambda a: (
        f"{a['caller']} is not the provider tested in round {a['roundId']}: only it may commit the roots"),
    "ProofOfGpuSeedAlreadyFixed": lambda a: f"round {a['roundId']}'s seed is fixed already",
    "ProofOfGpuSeedNotFixed": lambda a: (
        f"round {a['roundId']}'s seed is not fixed yet: its verifier must reveal its secret first"),
    "ProofOfGpuSeedDeadlinePassed": lambda a: (
        f"round {a['roundId']}'s deadline passed at {_utc(a['deadline'])}: too late to reveal the secret"),
    "ProofOfGpuWrongSecret": lambda a: (
        f"that secret does not match the hash given when round {a['roundId']} was requested: reveal the "
        "secret of that request"),
    "ProofOfGpuCommitDeadlinePassed": lambda a: (
        f"round {a['roundId']}'s commit deadline passed at {_utc(a['deadline'])}: too late to commit roots"),
    "ProofOfGpuCommitDeadlineNotPassed": lambda a: (
        f"round {a['roundId']}'s provider may commit until {_utc(a['deadline'])}: it can be marked failed only after"),
    "ProofOfGpuWrongRootCount": lambda a: (
        f"round {a['roundId']} needs {a['expected']} root(s), one per GPU, not {a['given']}"),
    "ProofOfGpuZeroRoot": lambda a: (
        f"GPU {a['gpuIndex']}'s root in round {a['roundId']} is empty (zero): a provider-software problem"),
    "ProofOfGpuAttestWindowOpen": lambda a: (
        f"round {a['roundId']}'s verifier may attest until {_utc(a['attestEnd'])}: it can be closed only after"),
    "ProofOfGpuGpuIndexOutOfRange": lambda a: (
        f"round {a['roundId']} tests {a['gpuCount']} GPU(s), numbered from 0: there is no GPU {a['gpuIndex']}"),
    "ProofOfGpuZeroAddress": lambda a: _deployed("a zero address for Proof-of-GPU's staking contract or registry"),
    # ProviderRegistry.
    "ProviderRegistryAlreadyRegistered": lambda a: f"{a['provider']} is registered already: one registration per account",
    "ProviderRegistryNotRegistered": lambda a: f"{a['provider']} is not a registered provider: register first",
    "ProviderRegistryInsufficientStake": lambda a: (
        f"{a['provider']} has {_eth(a['stake'])} staked: a provider needs at least {_eth(a['required'])}; stake more first"),
    "ProviderRegistryBadGpuCount": lambda a: f"{a['count']} GPUs listed: a provider registers 1 to 16",
    "ProviderRegistryZeroUuidHash": lambda a: (
        f"GPU {a['gpuIndex']}'s identity hash is empty (zero): every GPU needs its device UUID hash"),
    "ProviderRegistryDuplicateUuidHash": lambda a: (
        f"the same GPU is listed twice (hash {_hex(a['uuidHash'])}): list each device once"),
    "ProviderRegistryDeviceClaimed": lambda a: (
        f"one of these GPUs (hash {_hex(a['uuidHash'])}) is registered by another provider, {a['holder']}: "
        "a device backs one provider at a time"),
    "ProviderRegistryGpuIndexOutOfRange": lambda a: (
        f"provider {a['provider']} has {a['gpuCount']} GPU(s), numbered from 0: there is no GPU {a['gpuIndex']}"),
    "ProviderRegistryAlreadyDeactivated": lambda a: f"{a['provider']} is deactivated already",
    "ProviderRegistryNotDeactivated": lambda a: (
        f"{a['provider']} is active: only a deactivated provider can be reactivated"),
    "ProviderRegistryNotWired": lambda a: (
        "the provider registry is not wired to the job escrow yet: a deployment problem for the operator "
        "(the deployment's wiring step has not run)"),
    "ProviderRegistryZeroAddress": lambda a: _deployed("a zero address for the registry's staking contract"),
    "ProviderRegistryZeroMinStake": lambda a: _deployed("a minimum provider stake of zero"),
    # Staking.
    "StakingZeroAmount": lambda a: "nothing to do with an amount of zero: there is no stake to move",
    "StakingWorkOpen": lambda a: (
        f"{a['account']} still has {a['openWork']} open job(s) or lease(s) holding its stake: the stake can "
        "start unbonding once they are settled"),
    "StakingInsufficientStake": lambda a: (
        f"{a['account']} has {_eth(a['bonded'])} bonded, not the {_eth(a['requested'])} asked for"),
    "StakingNothingUnbonding": lambda a: f"{a['account']} has no stake unbonding (`unchained balance` shows it)",
    "StakingStillUnbonding": lambda a: (
        f"the stake of {a['account']} is still unbonding: withdrawable from {_utc(a['releaseAt'])}"),
    "StakingNothingOwed": lambda a: "the staking contract owes you nothing (`unchained balance` lists what is owed)",
    "StakingBelowMinimum": lambda a: (
        f"{a['account']} has {_eth(a['bonded'])} bonded, below the {_eth(a['minStake'])} needed to take on "
        "work: it must stake more first (as a renter, pick another provider)"),
    "StakingNoOpenWork": lambda a: (
        f"{a['account']} has no open work to release: the contracts' bookkeeping disagrees (report it to the operator)"),
    "StakingTransferFailed": _payment_refused,
    "StakingZeroAddress": lambda a: _deployed("a zero treasury address for the staking contract"),
    "StakingInvalidBps": lambda a: _deployed(f"a slash reward of {_percent(a['bps'])}, above 100%"),
    "StakingInvalidDelay": lambda a: _deployed(
        f"an unbonding delay of {_span(a['delay'])}, outside 1 s to {_span(a['maxDelay'])}"),
}

__all__ = ["SENTENCES", "Sentence"]
