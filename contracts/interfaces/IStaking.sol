// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Staking of providers and verifiers
/// @notice Holds staked ETH. Stake leaves through an unbonding delay longer than every challenge
/// window (ChallengeManager refuses to deploy otherwise), and slashing reaches unbonding stake
/// too, so unstaking cannot dodge a pending slash. Stake that secures open work (an accepted job,
/// an active lease) cannot start unbonding until that work settles. Only holders of SLASHER_ROLE
/// (the ChallengeManager) can slash and only holders of LOCKER_ROLE (JobEscrow, LeaseManager)
/// record open work; both are granted once at deployment (IOneTimeWiring). Parameters are fixed
/// at deployment, within bounds checked here.
interface IStaking {
    /// @notice `account` added `amount` to its bonded stake, which is now `bonded`.
    event Staked(address indexed account, uint256 amount, uint256 bonded);
    /// @notice `amount` moved from bonded to unbonding stake; the whole unbonding entry
    /// (`unbonding`) is released at `releaseAt`.
    event UnbondRequested(address indexed account, uint256 amount, uint256 unbonding, uint64 releaseAt);
    /// @notice `account` took its released unbonding stake out.
    event UnbondedWithdrawn(address indexed account, uint256 amount);
    /// @notice `slashed` (of `requested`) was taken from `offender`: `reward` credited to
    /// `rewardRecipient`, the rest to the treasury.
    event Slashed(
        address indexed offender, uint256 requested, uint256 slashed, address indexed rewardRecipient, uint256 reward
    );
    /// @notice A pull balance (slash reward or treasury share) was paid out.
    event Withdrawn(address indexed account, uint256 amount);
    /// @notice `locker` recorded open work secured by `account`'s stake; `openWork` pieces are open.
    event StakeLocked(address indexed account, address indexed locker, uint256 openWork);
    /// @notice `locker` recorded that one piece of `account`'s open work settled.
    event StakeUnlocked(address indexed account, address indexed locker, uint256 openWork);

    error StakingZeroAmount();
    error StakingInsufficientStake(address account, uint256 requested, uint256 bonded);
    error StakingNothingUnbonding(address account);
    error StakingStillUnbonding(address account, uint64 releaseAt);
    error StakingNothingOwed(address account);
    error StakingTransferFailed(address to, uint256 amount);
    error StakingInvalidBps(uint256 bps);
    error StakingInvalidDelay(uint256 delay, uint256 maxDelay);
    error StakingZeroAddress();
    error StakingWorkOpen(address account, uint256 openWork);
    error StakingNoOpenWork(address account);
    error StakingBelowMinimum(address account, uint256 bonded, uint256 minStake);

    /// Hooks used by other Unchained contracts (stable):

    /// @notice Bonded stake of `account` (excluding stake that is unbonding).
    function stakeOf(address account) external view returns (uint256);

    /// @notice Whether `account` has at least `minStake` bonded and nothing unbonding: stake that
    /// can back new work (JobEscrow funds jobs only for such providers, whose stake then cannot
    /// leave before now + unbondingDelay). An account that asked to unbond is leaving: no new
    /// work until its unbonding entry is withdrawn (or slashed to zero).
    function isBondedFor(address account, uint256 minStake) external view returns (bool);

    /// @notice Slashes up to `amount` from `offender` (bonded first, then unbonding).
    /// `rewardRecipient` is credited the reward share, the treasury the rest (pull payments).
    /// @return slashed the amount actually taken (never more than the offender had)
    function slash(address offender, uint256 amount, address rewardRecipient) external returns (uint256 slashed);

    /// @notice Records one more piece of open work (an accepted job, an active lease) secured by
    /// `account`'s stake, which cannot start unbonding until every piece is unlocked. Reverts
    /// unless `account` has at least `minStake` bonded. Only LOCKER_ROLE.
    function lockStake(address account, uint256 minStake) external;

    /// @notice Records that one piece of `account`'s open work settled. Only LOCKER_ROLE.
    function unlockStake(address account) external;

    /// @notice Grants SLASHER_ROLE to `slashers` and LOCKER_ROLE to `lockers`, once, by the
    /// deployer; afterwards nobody can grant or revoke any role. Every locker that is a contract
    /// must implement IStakeLocker: requestUnbond and openWorkOf add what it counts itself.
    /// Every contract in `watchers` (IStakeWatcher: JobEscrow) is told of every stake change.
    function wire(address[] calldata slashers, address[] calldata lockers, address[] calldata watchers) external;

    /// Public API:

    /// @notice Adds msg.value to the caller's bonded stake.
    function stake() external payable;

    /// @notice Moves `amount` of the caller's bonded stake into its unbonding entry. The entry's
    /// release time is reset to now + unbondingDelay, also for what was already unbonding.
    /// Reverts while the caller has open work (openWorkOf > 0).
    function requestUnbond(uint256 amount) external;

    /// @notice Pays the caller's unbonding entry once its release time has come.
    function withdrawUnbonded() external;

    /// @notice Pays the caller's pull balance (slash rewards, treasury share).
    function withdraw() external;

    /// @notice Stake of `account` that is unbonding, and when it is released.
    function unbondingOf(address account) external view returns (uint256 amount, uint64 releaseAt);

    /// @notice Pieces of open work (accepted jobs, active leases) secured by `account`'s stake:
    /// those locked through lockStake plus those each locker contract counts itself
    /// (IStakeLocker.lockedWorkOf; JobEscrow counts committed jobs there).
    function openWorkOf(address account) external view returns (uint256);

    /// @notice Pull balance owed to `account`.
    function owedTo(address account) external view returns (uint256);

    /// @notice Sum of all bonded stake.
    function totalBonded() external view returns (uint256);

    /// @notice Sum of all unbonding stake.
    function totalUnbonding() external view returns (uint256);

    /// @notice Sum of all pull balances; balance == totalBonded + totalUnbonding + totalOwed.
    function totalOwed() external view returns (uint256);

    /// @notice Seconds between an unbond request and its release (at most MAX_UNBONDING_DELAY).
    function unbondingDelay() external view returns (uint64);

    /// @notice Share of each slash paid to the reward recipient, in basis points.
    function slashRewardBps() external view returns (uint16);

    /// @notice Receiver of the non-reward share of slashes.
    function treasury() external view returns (address);
}
