// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Time-boxed rental of a provider's GPUs ("pods"), paid per second
/// @notice A renter prepays gpuCount GPUs for a duration at the provider's hourly price; when the
/// lease ends (by the renter at any time, or by anyone after its end) the provider earns the
/// elapsed seconds and the renter gets the rest back. A provider never has more GPUs leased at
/// once than it registered. Payouts are pull balances in ETH. An active lease locks its provider's
/// stake in Staking (no unbonding) until it ends.
/// Delivery is certified by the renter, never by the provider alone:
/// 1. within DELIVERY_WINDOW of the start the provider offers the machine (offerAccess: the EIP-712
///    hash of the connection details it signed for the renter, host key included). A lease without
///    an offer by then can never be delivered: anyone may end it and the renter gets everything back.
/// 2. the renter's client logs in against that host key and then confirms (confirmDelivery). Until
///    it confirms, and for CONFIRM_WINDOW after the offer (at most until the lease's end), the renter
///    may end the lease with a full refund: a provider whose machine refuses the renter earns nothing.
/// 3. an offer the renter neither confirmed nor disputed within CONFIRM_WINDOW counts as delivered
///    (a silent renter cannot hold the provider's pay hostage); a renter who confirmed pays as usual.
/// A delivered lease pays the provider per second from the offer on (setup time is not billed).
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
    /// @notice The provider offered the lease's machine: `accessHash` is the EIP-712 digest of the
    /// LeaseAccess (host, port, user, host key fingerprint) it signed for the renter.
    event LeaseAccessOffered(uint256 indexed leaseId, address indexed provider, bytes32 accessHash);
    /// @notice The renter confirmed it logged in to the offered machine: no full refund from now on.
    event LeaseDelivered(uint256 indexed leaseId, address indexed renter, bytes32 accessHash);

    struct Delivery {
        bytes32 accessHash; // offered by the provider (zero: no offer yet)
        uint48 offeredAt;
        uint48 confirmedAt; // by the renter (zero: not confirmed)
    }

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
    error LeaseManagerAlreadyOffered(uint256 leaseId);
    error LeaseManagerDeliveryWindowClosed(uint256 leaseId, uint64 deadline);
    error LeaseManagerNotLeaseRenter(address caller, address renter);
    error LeaseManagerAccessNotOffered(uint256 leaseId);
    error LeaseManagerAccessMismatch(uint256 leaseId, bytes32 offered, bytes32 confirmed);
    error LeaseManagerAlreadyConfirmed(uint256 leaseId);

    /// @notice Leases `gpuCount` GPUs of `provider` for `durationSeconds`, paying msg.value ==
    /// leaseCost(provider, gpuCount, durationSeconds).
    /// @return leaseId the new lease's id (ids start at 1)
    function startLease(address provider, uint256 gpuCount, uint256 durationSeconds)
        external
        payable
        returns (uint256 leaseId);

    /// @notice Ends an active lease: by its renter at any time; by anyone once it has run out, or
    /// once its delivery deadline passed without an offer (the agent frees its GPUs so).
    /// A delivered lease (isDelivered) credits the provider the seconds from the offer to now (or
    /// to the end), at the lease's per-second rate, and the renter the rest; a lease not delivered
    /// when it ends refunds the renter in full.
    function endLease(uint256 leaseId) external;

    /// @notice The lease's provider offers the machine: `accessHash` is the EIP-712 digest of the
    /// LeaseAccess message (host, port, user, host key) it signed for the renter. Only once per
    /// lease, only while active and before deliveryDeadline(leaseId). Opens the renter's
    /// CONFIRM_WINDOW; earns nothing by itself.
    function offerAccess(uint256 leaseId, bytes32 accessHash) external;

    /// @notice The lease's renter confirms it logged in to the offered machine; `accessHash` must be
    /// the offered one (the renter confirms the host key it checked, no other). From then on the
    /// renter pays the elapsed seconds when it stops. Only once, only while the lease is active.
    function confirmDelivery(uint256 leaseId, bytes32 accessHash) external;

    /// @notice The access hash the provider offered for `leaseId` (zero before an offer).
    function deliveryOf(uint256 leaseId) external view returns (bytes32);

    /// @notice The offer and the renter's confirmation of `leaseId` (zeros where none).
    function getDelivery(uint256 leaseId) external view returns (Delivery memory);

    /// @notice Last moment (exclusive) the provider may offer `leaseId`: its start plus
    /// DELIVERY_WINDOW, or its end if that comes first.
    function deliveryDeadline(uint256 leaseId) external view returns (uint256);

    /// @notice Last moment (exclusive) the renter of an offered, unconfirmed lease may end it with
    /// a full refund: the offer plus CONFIRM_WINDOW, or the lease's end if that comes first; zero
    /// while nothing is offered (until the delivery deadline, stopping refunds in full anyway).
    function confirmDeadline(uint256 leaseId) external view returns (uint256);

    /// @notice True when `leaseId` counts as delivered now: confirmed by its renter, or offered and
    /// past its confirmDeadline. Ending a lease that is not delivered refunds its renter in full.
    function isDelivered(uint256 leaseId) external view returns (bool);

    /// @notice How long after its start the provider has to offer a lease's machine.
    function DELIVERY_WINDOW() external view returns (uint256);

    /// @notice How long after the offer the renter may dispute it (stop for a full refund) unless it
    /// confirmed delivery.
    function CONFIRM_WINDOW() external view returns (uint256);

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
