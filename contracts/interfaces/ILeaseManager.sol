// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Time-boxed rental of a provider's GPUs ("pods"), paid per second
/// @notice A renter prepays gpuCount GPUs for a duration at the provider's hourly price; when the
/// lease ends (by the renter at any time, or by anyone after its end) the provider earns the
/// elapsed seconds and the renter gets the rest back. A provider never has more GPUs leased at
/// once than it registered. Payouts are pull balances in ETH. An active lease locks its provider's
/// stake in Staking (no unbonding) until it ends.
interface ILeaseManager {
    enum LeaseStatus {
        None,
        Active,
        Ended
    }

    struct Lease {
        address renter;
        uint48 startedAt;
        uint48 endsAt; // paid until then
        address provider;
        uint32 gpuCount;
        uint48 endedAt; // zero while active
        LeaseStatus status;
        uint256 paid; // wei paid up front
    }

    event LeaseStarted(
        uint256 indexed leaseId,
        address indexed renter,
        address indexed provider,
        uint256 gpuCount,
        uint64 endsAt,
        uint256 paid
    );
    event LeaseEnded(uint256 indexed leaseId, address indexed endedBy, uint256 providerEarned, uint256 renterRefund);
    event Withdrawn(address indexed account, uint256 amount);

    error LeaseManagerZeroGpuCount();
    error LeaseManagerZeroDuration();
    error LeaseManagerDurationTooLong(uint256 duration, uint256 maxDuration);
    error LeaseManagerProviderInactive(address provider);
    error LeaseManagerNotEnoughGpus(address provider, uint256 requested, uint256 available);
    error LeaseManagerZeroPrice();
    error LeaseManagerWrongValue(uint256 sent, uint256 price);
    error LeaseManagerUnknownLease(uint256 leaseId);
    error LeaseManagerNotActive(uint256 leaseId);
    error LeaseManagerNotRenter(address caller, uint64 endsAt);
    error LeaseManagerNothingOwed(address account);
    error LeaseManagerTransferFailed(address to, uint256 amount);

    /// @notice Leases `gpuCount` GPUs of `provider` for `durationSeconds`, paying msg.value ==
    /// leaseCost(provider, gpuCount, durationSeconds).
    /// @return leaseId the new lease's id (ids start at 1)
    function startLease(address provider, uint256 gpuCount, uint256 durationSeconds)
        external
        payable
        returns (uint256 leaseId);

    /// @notice Ends an active lease: by its renter at any time, by anyone once it has run out.
    /// Credits the provider the elapsed seconds (at most what was paid) and the renter the rest.
    function endLease(uint256 leaseId) external;

    /// @notice Pays the caller's pull balance.
    function withdraw() external;

    /// @notice Price in wei of `gpuCount` GPUs of `provider` for `durationSeconds`:
    /// pricePerGpuHour * gpuCount * durationSeconds / 3600.
    function leaseCost(address provider, uint256 gpuCount, uint256 durationSeconds) external view returns (uint256);

    /// @notice The lease `leaseId` (status None when unknown).
    function getLease(uint256 leaseId) external view returns (Lease memory);

    /// @notice GPUs of `provider` under active leases.
    function leasedGpusOf(address provider) external view returns (uint256);

    /// @notice GPUs of `provider` that can still be leased now.
    function availableGpusOf(address provider) external view returns (uint256);

    /// @notice True when any GPU of `provider` is under an active lease (the agent then skips
    /// PoG rounds and pauses mining on them).
    function isLeased(address provider) external view returns (bool);

    /// @notice Pull balance of `account`.
    function owedTo(address account) external view returns (uint256);

    /// @notice Number of leases started so far (the last lease id).
    function leaseCount() external view returns (uint256);

    /// @notice Longest lease one can start.
    function MAX_DURATION() external view returns (uint256);
}
