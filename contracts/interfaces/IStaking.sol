// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Staking of providers and verifiers
/// @notice Holds staked ETH. Stake leaves through an unbonding delay longer than every challenge
/// window, and slashing reaches unbonding stake too, so unstaking cannot dodge a pending slash.
/// Only holders of SLASHER_ROLE (the challenge and dispute contracts) can slash.
interface IStaking {
    /// Hooks used by other Unchained contracts (stable):

    /// @notice Bonded stake of `account` (excluding stake that is unbonding).
    function stakeOf(address account) external view returns (uint256);

    /// @notice Slashes up to `amount` from `offender` (bonded first, then unbonding).
    /// `rewardRecipient` is credited the reward share, the treasury the rest (pull payments).
    /// @return slashed the amount actually taken (never more than the offender had)
    function slash(address offender, uint256 amount, address rewardRecipient) external returns (uint256 slashed);
}
