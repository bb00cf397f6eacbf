// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title What Staking tells a contract that takes work for stakers after every stake change
/// @notice Staking calls stakeChanged after every stake, unbond request, unbonded withdrawal and
/// slash, so that the contract checks a staker's standing in its own storage, at the cost of one
/// slot read, instead of calling Staking on every piece of work (JobEscrow: createJob).
interface IStakeWatcher {
    /// @notice `account` now has `bonded` bonded and, if `unbonding`, stake unbonding. Only Staking.
    function stakeChanged(address account, uint256 bonded, bool unbonding) external;
}
