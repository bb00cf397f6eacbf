// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title A contract holding Staking's LOCKER_ROLE
/// @notice Staking asks every locker contract wired to it how much open work of an account it
/// counts itself (beside the pieces it locked through Staking.lockStake): stake cannot start
/// unbonding while any locker answers more than zero. A locker that counts nothing itself (all
/// its locks go through lockStake) answers zero.
interface IStakeLocker {
    /// @notice Pieces of open work secured by `account`'s stake that this contract counts itself.
    function lockedWorkOf(address account) external view returns (uint256);
}
