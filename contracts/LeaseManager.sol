// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IStakeLocker} from "./interfaces/IStakeLocker.sol";
import {ILeaseManager} from "./interfaces/ILeaseManager.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";
import {IStaking} from "./interfaces/IStaking.sol";

/// @title LeaseManager
/// @notice Per-second GPU leases; see ILeaseManager. The ETH held equals what active leases paid
/// plus all pull balances. Needs LOCKER_ROLE on Staking: an active lease locks its provider's stake
/// (no unbonding) until the lease ends.
contract LeaseManager is ILeaseManager, IStakeLocker {
    /// @inheritdoc ILeaseManager
    uint256 public constant MAX_DURATION = 365 days;
    /// @inheritdoc ILeaseManager
    uint256 public constant DELIVERY_WINDOW = 5 minutes;

    IProviderRegistry public immutable registry;
    /// @notice The registry's Staking, where an active lease locks its provider's stake.
    IStaking public immutable staking;
    /// @inheritdoc ILeaseManager
    uint256 public leaseCount;

    mapping(uint256 leaseId => Lease) private _leases;
    mapping(address provider => uint256) private _leasedGpus;
    mapping(address account => uint256) private _owed;
    // Kept beside Lease rather than in it, so that startLease writes no extra slot.
    mapping(uint256 leaseId => bytes32) private _delivered;

    constructor(IProviderRegistry registry_) {
        registry = registry_;
        staking = registry_.staking();
    }

    /// @inheritdoc ILeaseManager
    function startLease(address provider, uint256 gpuCount, uint256 durationSeconds)
        external
        payable
        returns (uint256 leaseId)
    {
        if (gpuCount == 0) revert LeaseManagerZeroGpuCount();
        if (durationSeconds == 0) revert LeaseManagerZeroDuration();
        if (durationSeconds > MAX_DURATION) revert LeaseManagerDurationTooLong(durationSeconds, MAX_DURATION);
        if (!registry.isActive(provider)) revert LeaseManagerProviderInactive(provider);
        uint256 leased = _leasedGpus[provider];
        uint256 available = registry.gpuCountOf(provider) - leased;
        if (gpuCount > available) revert LeaseManagerNotEnoughGpus(provider, gpuCount, available);
        uint256 price = _cost(provider, gpuCount, durationSeconds);
        if (price == 0) revert LeaseManagerZeroPrice();
        if (msg.value != price) revert LeaseManagerWrongValue(msg.value, price);

        _leasedGpus[provider] = leased + gpuCount;
        leaseId = ++leaseCount;
        // gpuCount <= MAX_GPUS and durationSeconds <= MAX_DURATION, so the casts are exact.
        uint48 endsAt = uint48(block.timestamp + durationSeconds);
        _leases[leaseId] = Lease({
            renter: msg.sender,
            startedAt: uint48(block.timestamp),
            endsAt: endsAt,
            provider: provider,
            gpuCount: uint32(gpuCount),
            endedAt: 0,
            status: LeaseStatus.Active,
            paid: price
        });
        emit LeaseStarted(leaseId, msg.sender, provider, gpuCount, endsAt, price);
        // isActive checked the minimum stake; the lock keeps it from unbonding until the lease ends.
        staking.lockStake(provider, 0);
    }

    /// @inheritdoc ILeaseManager
    function endLease(uint256 leaseId) external {
        Lease storage lease = _leases[leaseId];
        if (lease.status == LeaseStatus.None) revert LeaseManagerUnknownLease(leaseId);
        if (lease.status != LeaseStatus.Active) revert LeaseManagerNotActive(leaseId);
        uint256 endsAt = lease.endsAt;
        if (msg.sender != lease.renter && block.timestamp < endsAt) {
            revert LeaseManagerNotRenter(msg.sender, uint64(endsAt));
        }
        lease.status = LeaseStatus.Ended;
        lease.endedAt = uint48(block.timestamp);
        address provider = lease.provider;
        _leasedGpus[provider] -= lease.gpuCount;

        uint256 paid = lease.paid;
        uint256 startedAt = lease.startedAt;
        // Elapsed seconds at the lease's per-second rate, never more than was paid; nothing for a
        // lease whose delivery window passed without a confirmation.
        uint256 earned;
        if (_delivered[leaseId] != 0 || block.timestamp < _deadline(startedAt, endsAt)) {
            earned = block.timestamp >= endsAt ? paid : (paid * (block.timestamp - startedAt)) / (endsAt - startedAt);
        }
        uint256 refund = paid - earned;
        if (earned != 0) _owed[provider] += earned;
        if (refund != 0) _owed[lease.renter] += refund;
        emit LeaseEnded(leaseId, msg.sender, earned, refund);
        staking.unlockStake(provider);
    }

    /// @inheritdoc ILeaseManager
    function confirmDelivery(uint256 leaseId, bytes32 accessHash) external {
        Lease storage lease = _leases[leaseId];
        if (lease.status == LeaseStatus.None) revert LeaseManagerUnknownLease(leaseId);
        if (lease.status != LeaseStatus.Active) revert LeaseManagerNotActive(leaseId);
        if (msg.sender != lease.provider) revert LeaseManagerNotProvider(msg.sender, lease.provider);
        if (accessHash == bytes32(0)) revert LeaseManagerZeroAccessHash();
        if (_delivered[leaseId] != 0) revert LeaseManagerAlreadyDelivered(leaseId);
        uint256 deadline = _deadline(lease.startedAt, lease.endsAt);
        if (block.timestamp >= deadline) revert LeaseManagerDeliveryWindowClosed(leaseId, uint64(deadline));
        _delivered[leaseId] = accessHash;
        emit LeaseDelivered(leaseId, msg.sender, accessHash);
    }

    /// @inheritdoc IStakeLocker
    /// @dev A lease locks its provider's stake through Staking.lockStake: nothing is counted here.
    function lockedWorkOf(address) external pure returns (uint256) {
        return 0;
    }

    /// @inheritdoc ILeaseManager
    function withdraw() external {
        uint256 amount = _owed[msg.sender];
        if (amount == 0) revert LeaseManagerNothingOwed(msg.sender);
        _owed[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        (bool ok,) = msg.sender.call{value: amount}("");
        if (!ok) revert LeaseManagerTransferFailed(msg.sender, amount);
    }

    /// @inheritdoc ILeaseManager
    function leaseCost(address provider, uint256 gpuCount, uint256 durationSeconds) external view returns (uint256) {
        return _cost(provider, gpuCount, durationSeconds);
    }

    /// @inheritdoc ILeaseManager
    function getLease(uint256 leaseId) external view returns (Lease memory) {
        return _leases[leaseId];
    }

    /// @inheritdoc ILeaseManager
    function deliveryOf(uint256 leaseId) external view returns (bytes32) {
        return _delivered[leaseId];
    }

    /// @inheritdoc ILeaseManager
    function deliveryDeadline(uint256 leaseId) external view returns (uint256) {
        Lease storage lease = _leases[leaseId];
        if (lease.status == LeaseStatus.None) revert LeaseManagerUnknownLease(leaseId);
        return _deadline(lease.startedAt, lease.endsAt);
    }

    /// @inheritdoc ILeaseManager
    function leasedGpusOf(address provider) external view returns (uint256) {
        return _leasedGpus[provider];
    }

    /// @inheritdoc ILeaseManager
    function availableGpusOf(address provider) external view returns (uint256) {
        uint256 gpus = registry.gpuCountOf(provider);
        uint256 leased = _leasedGpus[provider];
        return gpus > leased ? gpus - leased : 0;
    }

    /// @inheritdoc ILeaseManager
    function isLeased(address provider) external view returns (bool) {
        return _leasedGpus[provider] != 0;
    }

    /// @inheritdoc ILeaseManager
    function owedTo(address account) external view returns (uint256) {
        return _owed[account];
    }

    function _deadline(uint256 startedAt, uint256 endsAt) private pure returns (uint256) {
        uint256 windowEnd = startedAt + DELIVERY_WINDOW;
        return windowEnd < endsAt ? windowEnd : endsAt;
    }

    function _cost(address provider, uint256 gpuCount, uint256 durationSeconds) private view returns (uint256) {
        return (registry.pricePerGpuHourOf(provider) * gpuCount * durationSeconds) / 3600;
    }
}
