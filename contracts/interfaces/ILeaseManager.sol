// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Time-boxed rental of a provider's GPUs ("pods"), paid per second
/// @notice A renter prepays gpuCount GPUs for a duration at the provider's hourly price; when the
/// lease ends (by the renter at any time, or by anyone after its end) the provider earns the
/// elapsed seconds and the renter gets the rest back. A provider never has more GPUs leased at
/// once than it registered. Payouts are pull balances in ETH. An active lease locks its provider's
/// stake in Staking (no unbonding) until it ends.
/// Delivery: within DELIVERY_WINDOW of the start the provider confirms on-chain that it handed the
/// machine over (the EIP-712 hash of the connection details it signed for the renter). A lease
/// still unconfirmed once that window has passed was never delivered: whoever ends it, the renter
/// gets everything back and the provider earns nothing.
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
    event LeaseDelivered(uint256 indexed leaseId, address indexed provider, bytes32 accessHash);

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
    error LeaseManagerNotProvider(address caller, address provider);
    error LeaseManagerZeroAccessHash();
    error LeaseManagerAlreadyDelivered(uint256 leaseId);
    error LeaseManagerDeliveryWindowClosed(uint256 leaseId, uint64 deadline);

    /// @notice Leases `gpuCount` GPUs of `provider` for `durationSeconds`, paying msg.value ==
    /// leaseCost(provider, gpuCount, durationSeconds).
    /// @return leaseId the new lease's id (ids start at 1)
    function startLease(address provider, uint256 gpuCount, uint256 durationSeconds)
        external
        payable
        returns (uint256 leaseId);

    /// @notice Ends an active lease: by its renter at any time, by anyone once it has run out.
    /// Credits the provider the elapsed seconds (at most what was paid) and the renter the rest;
    /// a lease never delivered (no confirmDelivery by deliveryDeadline) refunds the renter in full.
    function endLease(uint256 leaseId) external;

    /// @notice The lease's provider confirms it handed the machine over: `accessHash` is the
    /// EIP-712 digest of the LeaseAccess message (host, port, user, host key) it signed for the
    /// renter. Only once per lease, only while active and before deliveryDeadline(leaseId).
    function confirmDelivery(uint256 leaseId, bytes32 accessHash) external;

    /// @notice The confirmed access hash of `leaseId` (zero while undelivered).
    function deliveryOf(uint256 leaseId) external view returns (bytes32);

    /// @notice Last moment (exclusive) the provider may confirm delivery of `leaseId`: its start
    /// plus DELIVERY_WINDOW, or its end if that comes first.
    function deliveryDeadline(uint256 leaseId) external view returns (uint256);

    /// @notice How long after its start a lease may remain unconfirmed before it counts as undelivered.
    function DELIVERY_WINDOW() external view returns (uint256);

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
