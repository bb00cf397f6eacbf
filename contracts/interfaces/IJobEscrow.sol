// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Escrow of renters' payments for jobs
interface IJobEscrow {
    enum JobStatus {
        None,
        Funded, // renter paid, provider has not accepted
        Accepted, // provider accepted, result due by the deadline
        Committed, // result committed, challenge window running
        Finalized, // provider paid (minus fee), rest refunded
        Refunded // renter refunded in full
    }

    struct Job {
        address renter;
        address provider;
        address token; // address(0) for ETH
        uint256 price;
        bytes32 specHash;
        uint64 deadline; // result due by then
        uint64 committedAt;
        uint64 challengeWindowEnd;
        JobStatus status;
        bool frozen; // an open challenge or dispute holds the escrow
        bytes32 outputRoot;
        uint256 itemCount;
        bytes32 resultDigest;
    }

    /// Hooks used by other Unchained contracts (stable):

    function getJob(uint256 jobId) external view returns (Job memory);

    /// @notice Freezes a committed job's escrow while a challenge or dispute is open. Only
    /// DISPUTE_ROLE, and only inside the challenge window.
    function freeze(uint256 jobId) external;

    /// @notice Ends a freeze. `providerAtFault` refunds the renter in full; otherwise the job
    /// becomes finalizable again (at once if its window has passed). Only DISPUTE_ROLE.
    function resolveFreeze(uint256 jobId, bool providerAtFault) external;
}
