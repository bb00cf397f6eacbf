// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IJobEscrow} from "../interfaces/IJobEscrow.sol";
import {EscrowBalances} from "./EscrowBalances.sol";

/// @title EscrowJobs
/// @notice The jobs' slots: one JobState per job, and how a Job given in calldata is checked
/// against it. The lifecycle (JobEscrow) and signed-result slashing (SignedResults) change them.
/// @dev A job keeps one slot (JobState: a 192-bit truncated hash of the Job beside its status,
/// frozen flag and endsAt), written new once at create and rewritten at commit and at
/// settlement; the Job itself comes back in calldata. Finding two Jobs with the same 192-bit hash
/// takes about 2^96 hashes (birthday bound), out of reach.
abstract contract EscrowJobs is EscrowBalances {
    /// @inheritdoc IJobEscrow
    uint256 public jobCount;

    mapping(uint256 jobId => JobState) internal _jobs;

    /// @inheritdoc IJobEscrow
    function jobState(uint256 jobId) external view returns (JobState memory) {
        return _jobs[jobId];
    }

    /// @inheritdoc IJobEscrow
    /// @dev Job is ten static words, so abi.encode(job) is the 320 bytes at `job` in calldata
    /// when they are canonical (clean addresses and uint64); hashed as they are, non-canonical
    /// words give another hash, which no stored jobHash matches.
    function hashJob(Job calldata job) public pure returns (bytes24 jobHash) {
        assembly ("memory-safe") {
            let ptr := mload(0x40)
            calldatacopy(ptr, job, 0x140)
            jobHash := and(keccak256(ptr, 0x140), not(0xffffffffffffffff))
        }
    }

    /// @dev Ends the job as Refunded and credits the renter its full price.
    function _refund(JobState storage state, address renter, address token, uint256 price) internal {
        state.status = JobStatus.Refunded;
        _credit(token, renter, price);
    }

    /// @dev The job's slot, once `job` is known to be what it holds, and its status (read with
    /// the hash in one statement: one slot read).
    function _checked(Job calldata job) internal view returns (JobState storage state, JobStatus status) {
        state = _jobs[job.id];
        bytes24 jobHash;
        (status, jobHash) = (state.status, state.jobHash);
        if (status == JobStatus.None) revert JobEscrowUnknownJob(job.id);
        if (jobHash != hashJob(job)) revert JobEscrowJobMismatch(job.id);
    }

    function _requireStatus(uint256 jobId, JobStatus status, JobStatus expected) internal pure {
        if (status != expected) revert JobEscrowWrongStatus(jobId, status);
    }
}
