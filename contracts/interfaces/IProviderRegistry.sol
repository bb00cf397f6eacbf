// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Registry of GPU providers
interface IProviderRegistry {
    /// Hooks used by other Unchained contracts (stable):

    /// @notice True when `provider` is registered, not deactivated and holds the minimum stake.
    function isActive(address provider) external view returns (bool);

    /// @notice Number of GPUs the provider claims.
    function gpuCountOf(address provider) external view returns (uint256);

    /// @notice keccak256 of the device UUID of GPU `gpuIndex` of `provider`.
    function uuidHashOf(address provider, uint256 gpuIndex) external view returns (bytes32);

    /// @notice Price per GPU-hour in wei.
    function pricePerGpuHourOf(address provider) external view returns (uint256);

    /// @notice Records the outcome of a Proof-of-GPU round. Only POG_ROLE (the PoG contract).
    /// @param gpuClass identified class (e.g. bytes32("H100-SXM")), zero when the round failed
    /// @param tflopsMilli measured TFLOPS times 1000
    function setPogStatus(address provider, uint256 roundId, bytes32 gpuClass, uint256 tflopsMilli, bool passed)
        external;
}
