// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {OneTimeWiring} from "./access/OneTimeWiring.sol";
import {IStakeWatcher} from "./interfaces/IStakeWatcher.sol";
import {IStakeLocker} from "./interfaces/IStakeLocker.sol";
import {IStaking} from "./interfaces/IStaking.sol";
import {PullBalances} from "./mixins/PullBalances.sol";

/// @title Staking
/// @notice ETH stake of providers and verifiers; see IStaking. Every wei held is bonded,
/// unbonding or owed: address(this).balance == totalBonded + totalUnbonding + totalOwed.
/// Roles are granted once by the deployer (OneTimeWiring); parameters are immutable.
contract Staking is IStaking, OneTimeWiring, PullBalances {
    bytes32 public constant SLASHER_ROLE = keccak256("SLASHER_ROLE");
    bytes32 public constant LOCKER_ROLE = keccak256("LOCKER_ROLE");
    /// @notice Longest unbonding delay a deployment may set: stake is never locked for longer,
    /// and now + delay never overflows uint64.
    uint64 public constant MAX_UNBONDING_DELAY = 30 days;
    uint256 private constant BPS = 10_000;

    /// @dev Bonded stake and open work share one slot: locking reads and writes it once.
    struct Account {
        uint128 bonded;
        uint64 openWork;
    }

    struct Unbonding {
        uint192 amount;
        uint64 releaseAt;
    }

    mapping(address account => Account) private _accounts;
    mapping(address account => Unbonding) private _unbonding;
    mapping(address account => uint256) private _owed;
    /// @dev The locker contracts (wired once, at most MAX_ROLE_HOLDERS): requestUnbond asks each
    /// for the open work it counts itself (JobEscrow counts a provider's committed jobs where it
    /// already writes, instead of locking here once per job).
    IStakeLocker[] private _lockerContracts;
    /// @dev Told of every stake change (wired once, at most MAX_ROLE_HOLDERS; JobEscrow): see IStakeWatcher.
    IStakeWatcher[] private _watchers;

    /// @inheritdoc IStaking
    uint256 public totalBonded;
    /// @inheritdoc IStaking
    uint256 public totalUnbonding;
    /// @inheritdoc IStaking
    uint256 public totalOwed;
    /// @inheritdoc IStaking
    uint64 public immutable unbondingDelay;
    /// @inheritdoc IStaking
    uint16 public immutable slashRewardBps;
    /// @inheritdoc IStaking
    address public immutable treasury;

    /// @param unbondingDelay_ must exceed every challenge window of the contracts that slash
    /// (ChallengeManager checks it); at most MAX_UNBONDING_DELAY
    constructor(uint64 unbondingDelay_, uint16 slashRewardBps_, address treasury_) {
        if (unbondingDelay_ == 0 || unbondingDelay_ > MAX_UNBONDING_DELAY) {
            revert StakingInvalidDelay(unbondingDelay_, MAX_UNBONDING_DELAY);
        }
        if (slashRewardBps_ > BPS) revert StakingInvalidBps(slashRewardBps_);
        if (treasury_ == address(0)) revert StakingZeroAddress();
        unbondingDelay = unbondingDelay_;
        slashRewardBps = slashRewardBps_;
        treasury = treasury_;
    }

    /// @inheritdoc IStaking
    function wire(address[] calldata slashers, address[] calldata lockers, address[] calldata watchers)
        external
        wiring
    {
        _grantAll(SLASHER_ROLE, slashers);
        _grantAll(LOCKER_ROLE, lockers);
        for (uint256 i; i < lockers.length; ++i) {
            // An account without code (a test's locker) counts nothing itself. A contract must
            // answer lockedWorkOf, or the wiring reverts here rather than every unbond later.
            if (lockers[i].code.length == 0) continue;
            IStakeLocker locker = IStakeLocker(lockers[i]);
            locker.lockedWorkOf(address(0));
            _lockerContracts.push(locker);
        }
        if (watchers.length > MAX_ROLE_HOLDERS) revert WiringTooManyHolders(watchers.length, MAX_ROLE_HOLDERS);
        for (uint256 i; i < watchers.length; ++i) {
            _watchers.push(IStakeWatcher(watchers[i]));
        }
    }

    /// @inheritdoc IStaking
    function stake() external payable {
        if (msg.value == 0) revert StakingZeroAmount();
        Account storage account = _accounts[msg.sender];
        // Cannot overflow uint128: total ETH supply is far below 2^128 wei.
        uint128 bonded = account.bonded + uint128(msg.value);
        account.bonded = bonded;
        totalBonded += msg.value;
        emit Staked(msg.sender, msg.value, bonded);
        _notify(msg.sender);
    }

    /// @inheritdoc IStaking
    function requestUnbond(uint256 amount) external {
        if (amount == 0) revert StakingZeroAmount();
        Account storage account = _accounts[msg.sender];
        uint256 bonded = account.bonded;
        uint256 openWork = _openWork(msg.sender, account.openWork);
        if (openWork != 0) revert StakingWorkOpen(msg.sender, openWork);
        if (amount > bonded) revert StakingInsufficientStake(msg.sender, amount, bonded);
        account.bonded = uint128(bonded - amount);
        totalBonded -= amount;
        Unbonding storage entry = _unbonding[msg.sender];
        // Cannot overflow uint192: total ETH supply is far below 2^192 wei; nor uint64, as the
        // delay is at most MAX_UNBONDING_DELAY.
        uint192 unbonding = entry.amount + uint192(amount);
        uint64 releaseAt = uint64(block.timestamp) + unbondingDelay;
        entry.amount = unbonding;
        entry.releaseAt = releaseAt;
        totalUnbonding += amount;
        emit UnbondRequested(msg.sender, amount, unbonding, releaseAt);
        _notify(msg.sender);
    }

    /// @inheritdoc IStaking
    function withdrawUnbonded() external {
        Unbonding memory entry = _unbonding[msg.sender];
        if (entry.amount == 0) revert StakingNothingUnbonding(msg.sender);
        if (block.timestamp < entry.releaseAt) revert StakingStillUnbonding(msg.sender, entry.releaseAt);
        delete _unbonding[msg.sender];
        totalUnbonding -= entry.amount;
        emit UnbondedWithdrawn(msg.sender, entry.amount);
        _notify(msg.sender);
        _sendEth(msg.sender, entry.amount);
    }

    /// @inheritdoc IStaking
    function slash(address offender, uint256 amount, address rewardRecipient)
        external
        onlyRole(SLASHER_ROLE)
        returns (uint256 slashed)
    {
        Account storage account = _accounts[offender];
        uint256 bonded = account.bonded;
        Unbonding storage entry = _unbonding[offender];
        uint256 unbonding = entry.amount;
        uint256 fromBonded = amount < bonded ? amount : bonded;
        uint256 rest = amount - fromBonded;
        uint256 fromUnbonding = rest < unbonding ? rest : unbonding;
        slashed = fromBonded + fromUnbonding;

        if (fromBonded != 0) {
            account.bonded = uint128(bonded - fromBonded);
            totalBonded -= fromBonded;
        }
        if (fromUnbonding != 0) {
            entry.amount = uint192(unbonding - fromUnbonding);
            totalUnbonding -= fromUnbonding;
        }
        // An offender never earns from its own slash.
        bool noReward = rewardRecipient == address(0) || rewardRecipient == offender;
        uint256 reward = noReward ? 0 : (slashed * slashRewardBps) / BPS;
        if (reward != 0) _owed[rewardRecipient] += reward;
        if (slashed != reward) _owed[treasury] += slashed - reward;
        totalOwed += slashed;
        emit Slashed(offender, amount, slashed, rewardRecipient, reward);
        _notify(offender);
    }

    /// @inheritdoc IStaking
    function lockStake(address account, uint256 minStake) external onlyRole(LOCKER_ROLE) {
        Account storage entry = _accounts[account];
        uint256 bonded = entry.bonded;
        if (bonded < minStake) revert StakingBelowMinimum(account, bonded, minStake);
        // One piece per accepted job or active lease: never near 2^64.
        uint64 openWork = entry.openWork + 1;
        entry.openWork = openWork;
        emit StakeLocked(account, msg.sender, openWork);
    }

    /// @inheritdoc IStaking
    function unlockStake(address account) external onlyRole(LOCKER_ROLE) {
        Account storage entry = _accounts[account];
        uint64 openWork = entry.openWork;
        if (openWork == 0) revert StakingNoOpenWork(account);
        entry.openWork = openWork - 1;
        emit StakeUnlocked(account, msg.sender, openWork - 1);
    }

    /// @inheritdoc IStaking
    function withdraw() external {
        if (_withdrawEth() == 0) revert StakingNothingOwed(msg.sender);
    }

    /// @inheritdoc IStaking
    function stakeOf(address account) external view returns (uint256) {
        return _accounts[account].bonded;
    }

    /// @inheritdoc IStaking
    function isBondedFor(address account, uint256 minStake) external view returns (bool) {
        return _accounts[account].bonded >= minStake && _unbonding[account].amount == 0;
    }

    /// @inheritdoc IStaking
    function openWorkOf(address account) external view returns (uint256) {
        return _openWork(account, _accounts[account].openWork);
    }

    /// @inheritdoc IStaking
    function unbondingOf(address account) external view returns (uint256 amount, uint64 releaseAt) {
        Unbonding memory entry = _unbonding[account];
        return (entry.amount, entry.releaseAt);
    }

    /// @inheritdoc IStaking
    function owedTo(address account) external view returns (uint256) {
        return _owed[account];
    }

    /// @dev `lockedHere` (pieces locked through lockStake) plus what every locker contract counts.
    function _openWork(address account, uint256 lockedHere) private view returns (uint256 openWork) {
        openWork = lockedHere;
        uint256 count = _lockerContracts.length;
        for (uint256 i; i < count; ++i) {
            openWork += _lockerContracts[i].lockedWorkOf(account);
        }
    }

    /// @dev Tells every watcher `account`'s stake as it is now (after the change's effects).
    function _notify(address account) private {
        uint256 count = _watchers.length;
        if (count == 0) return;
        uint256 bonded = _accounts[account].bonded;
        bool unbonding = _unbonding[account].amount != 0;
        for (uint256 i; i < count; ++i) {
            _watchers[i].stakeChanged(account, bonded, unbonding);
        }
    }

    /// @dev PullBalances: the owed amount leaves totalOwed with the balance.
    function _debitAll(address, address account) internal override returns (uint256 amount) {
        amount = _owed[account];
        if (amount == 0) return 0;
        _owed[account] = 0;
        totalOwed -= amount;
        emit Withdrawn(account, amount);
    }

    function _revertTransferFailed(address to, uint256 amount) internal pure override {
        revert StakingTransferFailed(to, amount);
    }
}
