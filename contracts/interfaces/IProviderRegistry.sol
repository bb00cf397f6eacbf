// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IProviderActivity} from "./IProviderActivity.sol";
import {IStaking} from "./IStaking.sol";

/// @title Registry of GPU providers
/// @notice A provider registers its GPUs (by device-UUID hash), prices and metadata while it
/// holds the minimum stake in Staking; Proof-of-GPU results are recorded here by POG_ROLE, which
/// the deployer grants once (IOneTimeWiring) to the ProofOfGpu contract. The deployer names the
/// JobEscrow in the same wiring: the registry tells it (IProviderActivity) whenever a provider
/// registers, deactivates or reactivates, so that funding a job checks the provider in one slot
/// of the escrow's own.
interface IProviderRegistry {
    struct Provider {
        bytes32 gpuModel; // claimed model, e.g. bytes32("H100-SXM")
        uint256 pricePerGpuHour; // wei
        uint256 pricePerJobUnit; // wei
        string metadataURI;
        bytes32[] uuidHashes; // keccak256 of each GPU's device UUID, 1..MAX_GPUS, distinct
        uint64 registeredAt; // zero when not registered
        bool deactivated;
    }

    struct PogStatus {
        uint256 roundId; // last recorded round
        bytes32 gpuClass; // identified class, zero when the round failed
        uint256 tflopsMilli; // measured TFLOPS times 1000
        bool passed;
        uint64 timestamp; // when it was recorded, zero when never
    }

    event ProviderRegistered(
        address indexed provider,
        bytes32 gpuModel,
        uint256 gpuCount,
        uint256 pricePerGpuHour,
        uint256 pricePerJobUnit,
        string metadataURI
    );
    event PricesUpdated(
        address indexed provider,
        uint256 oldPricePerGpuHour,
        uint256 newPricePerGpuHour,
        uint256 oldPricePerJobUnit,
        uint256 newPricePerJobUnit
    );
    event MetadataURIUpdated(address indexed provider, string oldURI, string newURI);
    event ProviderDeactivated(address indexed provider);
    event ProviderReactivated(address indexed provider);
    event PogStatusRecorded(
        address indexed provider, uint256 indexed roundId, bytes32 gpuClass, uint256 tflopsMilli, bool passed
    );

    error ProviderRegistryAlreadyRegistered(address provider);
    error ProviderRegistryNotRegistered(address provider);
    error ProviderRegistryInsufficientStake(address provider, uint256 stake, uint256 required);
    error ProviderRegistryBadGpuCount(uint256 count);
    error ProviderRegistryZeroUuidHash(uint256 gpuIndex);
    error ProviderRegistryDuplicateUuidHash(bytes32 uuidHash);
    error ProviderRegistryDeviceClaimed(bytes32 uuidHash, address holder);
    error ProviderRegistryGpuIndexOutOfRange(address provider, uint256 gpuIndex, uint256 gpuCount);
    error ProviderRegistryAlreadyDeactivated(address provider);
    error ProviderRegistryNotDeactivated(address provider);
    error ProviderRegistryZeroAddress();
    error ProviderRegistryZeroMinStake();
    error ProviderRegistryNotWired();

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

    /// @notice Grants POG_ROLE to `pogContracts` and names the JobEscrow told of every provider's
    /// activity, once, by the deployer; afterwards nobody can grant or revoke any role, and
    /// registering reverts (ProviderRegistryNotWired) until then.
    function wire(address[] calldata pogContracts, IProviderActivity jobEscrow_) external;

    /// @notice The JobEscrow told whenever a provider registers, deactivates or reactivates
    /// (zero until wired).
    function jobEscrow() external view returns (IProviderActivity);

    /// @notice The Staking contract whose bonded stake qualifies providers.
    function staking() external view returns (IStaking);

    /// Public API:

    /// @notice Registers the caller with 1..MAX_GPUS distinct, non-zero device-UUID hashes, none
    /// held by another registered account that has not deactivated (ProviderRegistryDeviceClaimed).
    /// Requires Staking.stakeOf(caller) >= minProviderStake.
    function register(
        bytes32 gpuModel,
        bytes32[] calldata uuidHashes,
        uint256 pricePerGpuHour,
        uint256 pricePerJobUnit,
        string calldata metadataURI
    ) external;

    /// @notice Sets the caller's prices (wei per GPU-hour, wei per job unit).
    function setPrices(uint256 pricePerGpuHour, uint256 pricePerJobUnit) external;

    /// @notice Sets the caller's metadata URI.
    function setMetadataURI(string calldata metadataURI) external;

    /// @notice Takes the caller out of the market (no new jobs or leases) until reactivate(), and
    /// releases its device-UUID hashes for other accounts.
    function deactivate() external;

    /// @notice Puts a deactivated caller back into the market; reverts
    /// (ProviderRegistryDeviceClaimed) when another account took one of its devices meanwhile.
    function reactivate() external;

    /// @notice Everything registered about `provider` (zero values when unregistered).
    function providerOf(address provider) external view returns (Provider memory);

    /// @notice The account holding device-UUID hash `uuidHash` (zero when none).
    function deviceHolderOf(bytes32 uuidHash) external view returns (address);

    /// @notice The last recorded Proof-of-GPU result of `provider`.
    function pogStatusOf(address provider) external view returns (PogStatus memory);

    /// @notice True when `provider` has registered (whether active or not).
    function isRegistered(address provider) external view returns (bool);

    /// @notice Price per job unit in wei.
    function pricePerJobUnitOf(address provider) external view returns (uint256);

    /// @notice Stake a provider must keep bonded to register, to stay active and to take on work
    /// (immutable, not zero).
    function minProviderStake() external view returns (uint256);

    /// @notice Most GPUs one provider can register.
    function MAX_GPUS() external view returns (uint256);
}
