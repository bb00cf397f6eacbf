// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IChallengeManager} from "../interfaces/IChallengeManager.sol";
import {IDisputeCommittee, IDisputeResolver} from "../interfaces/IDisputeCommittee.sol";
import {IJobEscrow} from "../interfaces/IJobEscrow.sol";
import {ChallengeCore} from "./ChallengeCore.sol";

/// @title JobChallenges
/// @notice Challenges of a job's committed output root: opened by the renter or a staked verifier
/// inside the job's challenge window, which freezes the job in the escrow until the challenge
/// ends; a challenger who finds a revealed digest wrong escalates to the committee vote.
abstract contract JobChallenges is ChallengeCore {
    /// @inheritdoc IChallengeManager
    mapping(uint256 jobId => uint256 challengeId) public activeJobChallenge;

    /// @inheritdoc IChallengeManager
    function challengeJob(IJobEscrow.Job calldata job, uint256 k) external payable returns (uint256 challengeId) {
        if (k == 0 || k > MAX_K) revert ChallengeBadK(k);
        uint256 jobId = job.id;
        // The job's fields are the escrow's: freeze below reverts unless they hash to its slot.
        IJobEscrow.JobState memory state = escrow.jobState(jobId);
        if (msg.sender != job.renter) _requireStakedVerifier(msg.sender);
        if (msg.sender == job.provider) revert ChallengeSelfChallenge(msg.sender);
        if (
            state.status != IJobEscrow.JobStatus.Committed || block.timestamp >= state.endsAt
                || job.itemCount == 0
        ) revert ChallengeJobNotChallengeable(jobId);
        uint256 active = activeJobChallenge[jobId];
        if (active != 0) revert ChallengeJobAlreadyChallenged(jobId, active);
        challengeId = _open(Kind.Job, job.provider, jobId, 0, job.outputRoot, job.itemCount, k);
        activeJobChallenge[jobId] = challengeId;
        emit JobChallenged(
            challengeId, jobId, msg.sender, job.provider, k, msg.value, block.timestamp + responseWindow
        );
        emit ChallengeRandomnessFixed(challengeId, _challenges[challengeId].randomness);
        escrow.freeze(job);
    }

    /// @inheritdoc IChallengeManager
    function escalate(uint256 challengeId) external returns (uint256 disputeId) {
        Challenge storage c = _existing(challengeId);
        if (c.kind != Kind.Job) revert ChallengeWrongKind(challengeId, c.kind);
        if (msg.sender != c.challenger) revert ChallengeNotChallenger(challengeId, msg.sender);
        if (c.status != Status.Answered) revert ChallengeWrongStatus(challengeId, c.status);
        uint256 windowEnd = uint256(c.answeredAt) + escalationWindow;
        if (block.timestamp > windowEnd) revert ChallengeWindowClosed(challengeId, windowEnd);
        c.status = Status.Escalated;
        disputeId = committee.open(challengeId, c.challenger, c.provider);
        c.disputeId = disputeId;
        emit ChallengeEscalated(challengeId, disputeId);
    }

    /// @inheritdoc IDisputeResolver
    /// @dev Only the committee, for an escalated challenge. ProviderAtFault: provider slashed, renter refunded, bond returned. ChallengerWrong: bond
    /// (minus fee) to the provider, challenger slashed by falseClaimSlash, escrow unfrozen.
    /// NoFault: bond returned, nobody slashed, escrow unfrozen.
    function onDisputeResolved(uint256 challengeId, IDisputeCommittee.Verdict verdict) external {
        if (msg.sender != address(committee)) revert ChallengeNotCommittee(msg.sender);
        Challenge storage c = _existing(challengeId);
        if (c.status != Status.Escalated) revert ChallengeWrongStatus(challengeId, c.status);
        emit ChallengeDisputeResolved(challengeId, uint8(verdict));
        if (verdict == IDisputeCommittee.Verdict.ProviderAtFault) {
            _faultProvider(challengeId, c, c.challenger);
        } else if (verdict == IDisputeCommittee.Verdict.ChallengerWrong) {
            c.status = Status.ChallengerFaulted;
            emit ChallengeClosed(challengeId, Status.ChallengerFaulted);
            _payBondToProvider(challengeId, c);
            _releaseJob(c, false);
            emit OffenderSlashed(challengeId, c.challenger, staking.slash(c.challenger, falseClaimSlash, c.provider));
        } else {
            _dismiss(challengeId, c);
        }
    }

    /// @dev ChallengeCore's hook, called when a job challenge ends: unfreezes its job (refunded
    /// when the provider is at fault) and lets the job be challenged again while its window lasts.
    function _releaseJob(Challenge storage c, bool providerAtFault) internal override {
        delete activeJobChallenge[c.subject];
        escrow.resolveFreeze(c.subject, providerAtFault);
    }
}
