// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title What the provider registry tells a contract that takes work for providers
/// @notice The registry calls setProviderActive when a provider registers (true), deactivates
/// (false) and reactivates (true), so that the contract checks a provider in its own storage, at
/// the cost of one slot read, instead of calling the registry on every piece of work.
interface IProviderActivity {
    /// @notice Records whether `provider` is registered and not deactivated. Only the registry.
    function setProviderActive(address provider, bool active) external;
}
