// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Staking of providers and verifiers
/// @notice Holds staked ETH. Stake leaves through an unbonding delay longer than every challenge
/// window, and slashing reaches unbonding stake too, so unstaking cannot dodge a pending slash.
/// Only holders of SLASHER_ROLE (the challenge and dispute contracts) can slash.
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
    event UnbondingDelaySet(uint64 oldDelay, uint64 newDelay);
    event SlashRewardBpsSet(uint16 oldBps, uint16 newBps);
    event TreasurySet(address indexed oldTreasury, address indexed newTreasury);

    error StakingZeroAmount();
    error StakingInsufficientStake(address account, uint256 requested, uint256 bonded);
    error StakingNothingUnbonding(address account);
    error StakingStillUnbonding(address account, uint64 releaseAt);
    error StakingNothingOwed(address account);
    error StakingTransferFailed(address to, uint256 amount);
    error StakingInvalidBps(uint256 bps);
    error StakingInvalidDelay(uint256 delay);
    error StakingZeroAddress();

    /// Hooks used by other Unchained contracts (stable):

    /// @notice Bonded stake of `account` (excluding stake that is unbonding).
    function stakeOf(address account) external view returns (uint256);

    /// @notice Slashes up to `amount` from `offender` (bonded first, then unbonding).
    /// `rewardRecipient` is credited the reward share, the treasury the rest (pull payments).
    /// @return slashed the amount actually taken (never more than the offender had)
    function slash(address offender, uint256 amount, address rewardRecipient) external returns (uint256 slashed);

    /// Public API:

    /// @notice Adds msg.value to the caller's bonded stake.
    function stake() external payable;

    /// @notice Moves `amount` of the caller's bonded stake into its unbonding entry. The entry's
    /// release time is reset to now + unbondingDelay, also for what was already unbonding.
    function requestUnbond(uint256 amount) external;

    /// @notice Pays the caller's unbonding entry once its release time has come.
    function withdrawUnbonded() external;

    /// @notice Pays the caller's pull balance (slash rewards, treasury share).
    function withdraw() external;

    /// @notice Stake of `account` that is unbonding, and when it is released.
    function unbondingOf(address account) external view returns (uint256 amount, uint64 releaseAt);

    /// @notice Pull balance owed to `account`.
    function owedTo(address account) external view returns (uint256);

    /// @notice Sum of all bonded stake.
    function totalBonded() external view returns (uint256);

    /// @notice Sum of all unbonding stake.
    function totalUnbonding() external view returns (uint256);

    /// @notice Sum of all pull balances; balance == totalBonded + totalUnbonding + totalOwed.
    function totalOwed() external view returns (uint256);

    /// @notice Seconds between an unbond request and its release.
    function unbondingDelay() external view returns (uint64);

    /// @notice Share of each slash paid to the reward recipient, in basis points.
    function slashRewardBps() external view returns (uint16);

    /// @notice Receiver of the non-reward share of slashes.
    function treasury() external view returns (address);
}
