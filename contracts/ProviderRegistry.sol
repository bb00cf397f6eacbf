// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {OneTimeWiring} from "./access/OneTimeWiring.sol";
import {IProviderActivity} from "./interfaces/IProviderActivity.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";
import {IStaking} from "./interfaces/IStaking.sol";

/// @title ProviderRegistry
/// @notice GPU providers, their prices and Proof-of-GPU status; see IProviderRegistry. POG_ROLE is
/// granted once by the deployer (OneTimeWiring), which names the JobEscrow told of every
/// provider's activity in the same call; the minimum stake is immutable.
contract ProviderRegistry is IProviderRegistry, OneTimeWiring {
    bytes32 public constant POG_ROLE = keccak256("POG_ROLE");
    /// @inheritdoc IProviderRegistry
    uint256 public constant MAX_GPUS = 16;

    /// @inheritdoc IProviderRegistry
    IStaking public immutable staking;
    /// @inheritdoc IProviderRegistry
    uint256 public immutable minProviderStake;
    /// @inheritdoc IProviderRegistry
    IProviderActivity public jobEscrow;

    mapping(address provider => Provider) private _providers;
    mapping(address provider => PogStatus) private _pog;
    /// @dev The registered, not deactivated account holding each device-UUID hash: one device
    /// cannot pass Proof of GPU for several accounts at once.
    mapping(bytes32 uuidHash => address provider) private _deviceHolder;

    /// @param minProviderStake_ bonded wei a provider needs to register, take jobs and be leased
    /// (not zero: a provider's work must always be secured by stake)
    constructor(IStaking staking_, uint256 minProviderStake_) {
        if (address(staking_) == address(0)) revert ProviderRegistryZeroAddress();
        if (minProviderStake_ == 0) revert ProviderRegistryZeroMinStake();
        staking = staking_;
        minProviderStake = minProviderStake_;
    }

    /// @inheritdoc IProviderRegistry
    function wire(address[] calldata pogContracts, IProviderActivity jobEscrow_) external wiring {
        if (address(jobEscrow_) == address(0)) revert WiringZeroAddress();
        _grantAll(POG_ROLE, pogContracts);
        jobEscrow = jobEscrow_;
    }

    /// @inheritdoc IProviderRegistry
    function register(
        bytes32 gpuModel,
        bytes32[] calldata uuidHashes,
        uint256 pricePerGpuHour,
        uint256 pricePerJobUnit,
        string calldata metadataURI
    ) external {
        Provider storage p = _providers[msg.sender];
        if (p.registeredAt != 0) revert ProviderRegistryAlreadyRegistered(msg.sender);
        uint256 stake = staking.stakeOf(msg.sender);
        if (stake < minProviderStake) {
            revert ProviderRegistryInsufficientStake(msg.sender, stake, minProviderStake);
        }
        uint256 count = uuidHashes.length;
        if (count == 0 || count > MAX_GPUS) revert ProviderRegistryBadGpuCount(count);
        for (uint256 i = 0; i < count; ++i) {
            bytes32 h = uuidHashes[i];
            if (h == bytes32(0)) revert ProviderRegistryZeroUuidHash(i);
            // At most MAX_GPUS^2 / 2 comparisons.
            for (uint256 j = 0; j < i; ++j) {
                if (uuidHashes[j] == h) revert ProviderRegistryDuplicateUuidHash(h);
            }
            _claimDevice(h);
            p.uuidHashes.push(h);
        }
        p.gpuModel = gpuModel;
        p.pricePerGpuHour = pricePerGpuHour;
        p.pricePerJobUnit = pricePerJobUnit;
        p.metadataURI = metadataURI;
        p.registeredAt = uint64(block.timestamp);
        emit ProviderRegistered(msg.sender, gpuModel, count, pricePerGpuHour, pricePerJobUnit, metadataURI);
        _tellEscrow(msg.sender, true);
    }

    /// @inheritdoc IProviderRegistry
    function setPrices(uint256 pricePerGpuHour, uint256 pricePerJobUnit) external {
        Provider storage p = _registered(msg.sender);
        emit PricesUpdated(msg.sender, p.pricePerGpuHour, pricePerGpuHour, p.pricePerJobUnit, pricePerJobUnit);
        p.pricePerGpuHour = pricePerGpuHour;
        p.pricePerJobUnit = pricePerJobUnit;
    }

    /// @inheritdoc IProviderRegistry
    function setMetadataURI(string calldata metadataURI) external {
        Provider storage p = _registered(msg.sender);
        emit MetadataURIUpdated(msg.sender, p.metadataURI, metadataURI);
        p.metadataURI = metadataURI;
    }

    /// @inheritdoc IProviderRegistry
    function deactivate() external {
        Provider storage p = _registered(msg.sender);
        if (p.deactivated) revert ProviderRegistryAlreadyDeactivated(msg.sender);
        p.deactivated = true;
        for (uint256 i = 0; i < p.uuidHashes.length; ++i) {
            delete _deviceHolder[p.uuidHashes[i]]; // the device may now serve another account
        }
        emit ProviderDeactivated(msg.sender);
        _tellEscrow(msg.sender, false);
    }

    /// @inheritdoc IProviderRegistry
    function reactivate() external {
        Provider storage p = _registered(msg.sender);
        if (!p.deactivated) revert ProviderRegistryNotDeactivated(msg.sender);
        p.deactivated = false;
        for (uint256 i = 0; i < p.uuidHashes.length; ++i) {
            _claimDevice(p.uuidHashes[i]);
        }
        emit ProviderReactivated(msg.sender);
        _tellEscrow(msg.sender, true);
    }

    /// @inheritdoc IProviderRegistry
    function setPogStatus(address provider, uint256 roundId, bytes32 gpuClass, uint256 tflopsMilli, bool passed)
        external
        onlyRole(POG_ROLE)
    {
        _registered(provider);
        _pog[provider] = PogStatus(roundId, gpuClass, tflopsMilli, passed, uint64(block.timestamp));
        emit PogStatusRecorded(provider, roundId, gpuClass, tflopsMilli, passed);
    }

    /// @inheritdoc IProviderRegistry
    function isActive(address provider) external view returns (bool) {
        Provider storage p = _providers[provider];
        return p.registeredAt != 0 && !p.deactivated && staking.stakeOf(provider) >= minProviderStake;
    }

    /// @inheritdoc IProviderRegistry
    function isRegistered(address provider) external view returns (bool) {
        return _providers[provider].registeredAt != 0;
    }

    /// @inheritdoc IProviderRegistry
    function gpuCountOf(address provider) external view returns (uint256) {
        return _providers[provider].uuidHashes.length;
    }

    /// @inheritdoc IProviderRegistry
    function uuidHashOf(address provider, uint256 gpuIndex) external view returns (bytes32) {
        bytes32[] storage hashes = _providers[provider].uuidHashes;
        if (gpuIndex >= hashes.length) {
            revert ProviderRegistryGpuIndexOutOfRange(provider, gpuIndex, hashes.length);
        }
        return hashes[gpuIndex];
    }

    /// @inheritdoc IProviderRegistry
    function pricePerGpuHourOf(address provider) external view returns (uint256) {
        return _providers[provider].pricePerGpuHour;
    }

    /// @inheritdoc IProviderRegistry
    function pricePerJobUnitOf(address provider) external view returns (uint256) {
        return _providers[provider].pricePerJobUnit;
    }

    /// @inheritdoc IProviderRegistry
    function providerOf(address provider) external view returns (Provider memory) {
        return _providers[provider];
    }

    /// @inheritdoc IProviderRegistry
    function deviceHolderOf(bytes32 uuidHash) external view returns (address) {
        return _deviceHolder[uuidHash];
    }

    /// @inheritdoc IProviderRegistry
    function pogStatusOf(address provider) external view returns (PogStatus memory) {
        return _pog[provider];
    }

    function _tellEscrow(address provider, bool active) private {
        IProviderActivity escrow = jobEscrow;
        if (address(escrow) == address(0)) revert ProviderRegistryNotWired();
        escrow.setProviderActive(provider, active);
    }

    function _claimDevice(bytes32 uuidHash) private {
        address holder = _deviceHolder[uuidHash];
        if (holder != address(0)) revert ProviderRegistryDeviceClaimed(uuidHash, holder);
        _deviceHolder[uuidHash] = msg.sender;
    }

    function _registered(address provider) private view returns (Provider storage p) {
        p = _providers[provider];
        if (p.registeredAt == 0) revert ProviderRegistryNotRegistered(provider);
    }
}
