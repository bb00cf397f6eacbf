// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IStakeLocker} from "./interfaces/IStakeLocker.sol";
import {ILeaseManager} from "./interfaces/ILeaseManager.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";
import {IStaking} from "./interfaces/IStaking.sol";
import {PullBalances} from "./mixins/PullBalances.sol";

/// @title LeaseManager
/// @notice Per-second GPU leases; see ILeaseManager. The ETH held equals what active leases paid
/// plus all pull balances. Needs LOCKER_ROLE on Staking: an active lease locks its provider's stake
/// (no unbonding) until the lease ends.
contract LeaseManager is ILeaseManager, IStakeLocker, PullBalances {
    /// @inheritdoc ILeaseManager
    uint256 public constant MAX_DURATION = 365 days;
    /// @inheritdoc ILeaseManager
    uint256 public constant DELIVERY_WINDOW = 5 minutes;
    /// @inheritdoc ILeaseManager
    /// @dev As long as a renter's client needs to notice the offer and try a login, with room for a
    /// slow or briefly offline client; also the most a renter that logged in but never confirmed
    /// can use for free (it stops inside the window): bounded, and only once per paid lease.
    uint256 public constant CONFIRM_WINDOW = 5 minutes;

    IProviderRegistry public immutable registry;
    /// @notice The registry's Staking, where an active lease locks its provider's stake.
    IStaking public immutable staking;
    /// @inheritdoc ILeaseManager
    uint256 public leaseCount;

    mapping(uint256 leaseId => Lease) private _leases;
    mapping(address provider => uint256) private _leasedGpus;
    mapping(address account => uint256) private _owed;
    // Kept beside Lease rather than in it, so that startLease writes no extra slot.
    mapping(uint256 leaseId => Delivery) private _deliveries;

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
        uint256 startedAt = lease.startedAt;
        uint256 endsAt = lease.endsAt;
        Delivery storage delivery = _deliveries[leaseId];
        bytes32 accessHash = delivery.accessHash;
        // Besides the renter: anyone once the lease ran out, or once it can never be delivered
        // (no offer by the deadline: the renter gets it all back, the provider gets its GPUs back).
        if (
            msg.sender != lease.renter && block.timestamp < endsAt
                && (accessHash != 0 || block.timestamp < _deadline(startedAt, endsAt))
        ) {
            revert LeaseManagerNotRenter(msg.sender, uint64(endsAt));
        }
        lease.status = LeaseStatus.Ended;
        lease.endedAt = uint48(block.timestamp);
        address provider = lease.provider;
        _leasedGpus[provider] -= lease.gpuCount;

        uint256 paid = lease.paid;
        // The seconds from the offer to now (or to the end) at the lease's per-second rate, never
        // more than was paid; nothing unless the renter confirmed or let its confirm window pass.
        uint256 earned;
        if (accessHash != 0 && _delivered(delivery, endsAt)) {
            uint256 offeredAt = delivery.offeredAt;
            uint256 until = block.timestamp < endsAt ? block.timestamp : endsAt;
            earned = (paid * (until - offeredAt)) / (endsAt - startedAt);
        }
        uint256 refund = paid - earned;
        if (earned != 0) _owed[provider] += earned;
        if (refund != 0) _owed[lease.renter] += refund;
        emit LeaseEnded(leaseId, msg.sender, earned, refund);
        staking.unlockStake(provider);
    }

    /// @inheritdoc ILeaseManager
    function offerAccess(uint256 leaseId, bytes32 accessHash) external {
        Lease storage lease = _leases[leaseId];
        if (lease.status == LeaseStatus.None) revert LeaseManagerUnknownLease(leaseId);
        if (lease.status != LeaseStatus.Active) revert LeaseManagerNotActive(leaseId);
        if (msg.sender != lease.provider) revert LeaseManagerNotProvider(msg.sender, lease.provider);
        if (accessHash == bytes32(0)) revert LeaseManagerZeroAccessHash();
        Delivery storage delivery = _deliveries[leaseId];
        if (delivery.accessHash != 0) revert LeaseManagerAlreadyOffered(leaseId);
        uint256 deadline = _deadline(lease.startedAt, lease.endsAt);
        if (block.timestamp >= deadline) revert LeaseManagerDeliveryWindowClosed(leaseId, uint64(deadline));
        delivery.accessHash = accessHash;
        delivery.offeredAt = uint48(block.timestamp);
        emit LeaseAccessOffered(leaseId, msg.sender, accessHash);
    }

    /// @inheritdoc ILeaseManager
    function confirmDelivery(uint256 leaseId, bytes32 accessHash) external {
        Lease storage lease = _leases[leaseId];
        if (lease.status == LeaseStatus.None) revert LeaseManagerUnknownLease(leaseId);
        if (lease.status != LeaseStatus.Active) revert LeaseManagerNotActive(leaseId);
        if (msg.sender != lease.renter) revert LeaseManagerNotLeaseRenter(msg.sender, lease.renter);
        Delivery storage delivery = _deliveries[leaseId];
        bytes32 offered = delivery.accessHash;
        if (offered == 0) revert LeaseManagerAccessNotOffered(leaseId);
        if (offered != accessHash) revert LeaseManagerAccessMismatch(leaseId, offered, accessHash);
        if (delivery.confirmedAt != 0) revert LeaseManagerAlreadyConfirmed(leaseId);
        delivery.confirmedAt = uint48(block.timestamp);
        emit LeaseDelivered(leaseId, msg.sender, accessHash);
    }

    /// @inheritdoc IStakeLocker
    /// @dev A lease locks its provider's stake through Staking.lockStake: nothing is counted here.
    function lockedWorkOf(address) external pure returns (uint256) {
        return 0;
    }

    /// @inheritdoc ILeaseManager
    function withdraw() external {
        if (_withdrawEth() == 0) revert LeaseManagerNothingOwed(msg.sender);
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
        return _deliveries[leaseId].accessHash;
    }

    /// @inheritdoc ILeaseManager
    function getDelivery(uint256 leaseId) external view returns (Delivery memory) {
        return _deliveries[leaseId];
    }

    /// @inheritdoc ILeaseManager
    function confirmDeadline(uint256 leaseId) external view returns (uint256) {
        Delivery storage delivery = _deliveries[leaseId];
        if (delivery.accessHash == 0) return 0;
        return _confirmDeadline(delivery.offeredAt, _leases[leaseId].endsAt);
    }

    /// @inheritdoc ILeaseManager
    function isDelivered(uint256 leaseId) external view returns (bool) {
        Delivery storage delivery = _deliveries[leaseId];
        return delivery.accessHash != 0 && _delivered(delivery, _leases[leaseId].endsAt);
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

    /// @dev PullBalances: an ETH-only ledger.
    function _debitAll(address, address account) internal override returns (uint256 amount) {
        amount = _owed[account];
        if (amount == 0) return 0;
        _owed[account] = 0;
        emit Withdrawn(account, amount);
    }

    function _revertTransferFailed(address to, uint256 amount) internal pure override {
        revert LeaseManagerTransferFailed(to, amount);
    }

    function _deadline(uint256 startedAt, uint256 endsAt) private pure returns (uint256) {
        uint256 windowEnd = startedAt + DELIVERY_WINDOW;
        return windowEnd < endsAt ? windowEnd : endsAt;
    }

    function _confirmDeadline(uint256 offeredAt, uint256 endsAt) private pure returns (uint256) {
        uint256 windowEnd = offeredAt + CONFIRM_WINDOW;
        return windowEnd < endsAt ? windowEnd : endsAt;
    }

    /// An offered lease counts as delivered once its renter confirmed, or once the renter let its
    /// confirm window pass without stopping (silence is not a dispute).
    function _delivered(Delivery storage delivery, uint256 endsAt) private view returns (bool) {
        return delivery.confirmedAt != 0 || block.timestamp >= _confirmDeadline(delivery.offeredAt, endsAt);
    }

    function _cost(address provider, uint256 gpuCount, uint256 durationSeconds) private view returns (uint256) {
        return (registry.pricePerGpuHourOf(provider) * gpuCount * durationSeconds) / 3600;
    }
}
