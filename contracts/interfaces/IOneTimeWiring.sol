// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Roles granted once, at deployment, and never again
/// @notice The deployer names, in one call, the contracts that hold this contract's roles
/// (`wire`). Nobody ever holds the admin role, so after that call nobody can grant or revoke a
/// role: the operator keeps no power over this contract. Holders are public (`hasRole`, and the
/// RoleGranted events of the wiring transaction).
interface IOneTimeWiring {
    /// @notice The deployer granted this contract's roles; no role can be granted from now on.
    event Wired(address indexed by);

    error WiringNotDeployer(address caller);
    error WiringAlreadyDone();
    error WiringTooManyHolders(uint256 count, uint256 max);
    error WiringZeroAddress();

    /// @notice Whether the roles have been granted (then nobody can grant any more).
    function wired() external view returns (bool);
}
