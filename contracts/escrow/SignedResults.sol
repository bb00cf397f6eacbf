// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {IJobEscrow} from "../interfaces/IJobEscrow.sol";
import {EscrowJobs} from "./EscrowJobs.sol";

/// @title SignedResults
/// @notice A provider's EIP-712 signed result (protocol/job_result.py) binds it to its commit:
/// slashSignedResult slashes it through Staking (SLASHER_ROLE) when the commit differs, or never
/// came although the provider promised it before the deadline (JobResult.commitBy), and the
/// renter gets the job's price back. The stake behind a signed result cannot leave before the
/// renter had a challenge window after the deadline to slash (JobEscrow's constructor checks the
/// unbonding delay; jobs are funded only for providers bonded with nothing unbonding).
abstract contract SignedResults is EscrowJobs, EIP712 {
    /// @dev EIP-712 type of what a provider signs; protocol/job_result.py JOB_RESULT_TYPES.
    bytes32 private constant JOB_RESULT_TYPEHASH =
        keccak256(
        "JobResult(uint256 jobId,bytes32 outputRoot,uint256 itemCount,bytes32 resultDigest,uint64 commitBy)"
    );

    constructor() EIP712("Unchained JobEscrow", "1") {}

    /// @inheritdoc IJobEscrow
    /// @dev A job counts as committed once its hash covers a result (itemCount is never zero in a
    /// commit, and the hash stays through every later status), so a commit that a challenge
    /// later refunded is still compared.
    function slashSignedResult(Job calldata job, JobResult calldata result, bytes calldata signature)
        external
        returns (uint256 slashed)
    {
        (JobState storage state, JobStatus status) = _checked(job);
        uint256 jobId = job.id;
        if (result.jobId != jobId) revert JobEscrowJobMismatch(result.jobId);
        if (state.resultSlashed) revert JobEscrowResultAlreadySlashed(jobId);
        address signer = ECDSA.recover(jobResultDigest(result), signature);
        if (signer != job.provider) revert JobEscrowNotProviderSignature(jobId, signer);
        if (job.itemCount != 0) {
            if (
                job.outputRoot == result.outputRoot && job.itemCount == result.itemCount
                    && job.resultDigest == result.resultDigest
            ) revert JobEscrowResultMatchesCommit(jobId);
        } else {
            if (state.cancelled) revert JobEscrowJobCancelled(jobId);
            // No margin stated: the provider never promised a commit (a deadline too close to
            // commit in time), so its result binds it only against committing something else.
            if (result.commitBy >= job.deadline) revert JobEscrowResultNotBinding(jobId, result.commitBy, job.deadline);
            if (block.timestamp < job.deadline) revert JobEscrowDeadlineNotPassed(jobId, job.deadline);
        }
        state.resultSlashed = true;
        // The provider is paid nothing for a job it was slashed for: money still held for it goes
        // back to the renter (a frozen job too: resolveFreeze then finds it Refunded).
        uint256 refund;
        if (status == JobStatus.Funded || status == JobStatus.Committed) {
            refund = job.price;
            _refund(state, job.renter, job.token, refund);
            if (status == JobStatus.Committed) _release(job.provider);
        }
        slashed = staking.slash(job.provider, minProviderStake, msg.sender);
        emit SignedResultSlashed(jobId, job.provider, msg.sender, slashed, refund);
    }

    /// @inheritdoc IJobEscrow
    function jobResultDigest(JobResult calldata result) public view returns (bytes32) {
        return _hashTypedDataV4(
            keccak256(
                abi.encode(
                    JOB_RESULT_TYPEHASH,
                    result.jobId,
                    result.outputRoot,
                    result.itemCount,
                    result.resultDigest,
                    result.commitBy
                )
            )
        );
    }
}
