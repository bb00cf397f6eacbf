// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {IStaking} from "./interfaces/IStaking.sol";

/// @title Staking
/// @notice ETH stake of providers and verifiers; see IStaking. Every wei held is bonded,
/// unbonding or owed: address(this).balance == totalBonded + totalUnbonding + totalOwed.
contract Staking is IStaking, AccessControl {
    bytes32 public constant SLASHER_ROLE = keccak256("SLASHER_ROLE");
    uint256 private constant BPS = 10_000;

    struct Unbonding {
        uint192 amount;
        uint64 releaseAt;
    }

    mapping(address account => uint256) private _bonded;
    mapping(address account => Unbonding) private _unbonding;
    mapping(address account => uint256) private _owed;

    /// @inheritdoc IStaking
    uint256 public totalBonded;
    /// @inheritdoc IStaking
    uint256 public totalUnbonding;
    /// @inheritdoc IStaking
    uint256 public totalOwed;
    /// @inheritdoc IStaking
    uint64 public unbondingDelay;
    /// @inheritdoc IStaking
    uint16 public slashRewardBps;
    /// @inheritdoc IStaking
    address public treasury;

    /// @param unbondingDelay_ must exceed every challenge window of the contracts that slash
    constructor(uint64 unbondingDelay_, uint16 slashRewardBps_, address treasury_) {
        _grantRole(DEFAULT_ADMIN_ROLE, msg.sender);
        setUnbondingDelay(unbondingDelay_);
        setSlashRewardBps(slashRewardBps_);
        setTreasury(treasury_);
    }

    /// @inheritdoc IStaking
    function stake() external payable {
        if (msg.value == 0) revert StakingZeroAmount();
        uint256 bonded = _bonded[msg.sender] + msg.value;
        _bonded[msg.sender] = bonded;
        totalBonded += msg.value;
        emit Staked(msg.sender, msg.value, bonded);
    }

    /// @inheritdoc IStaking
    function requestUnbond(uint256 amount) external {
        if (amount == 0) revert StakingZeroAmount();
        uint256 bonded = _bonded[msg.sender];
        if (amount > bonded) revert StakingInsufficientStake(msg.sender, amount, bonded);
        _bonded[msg.sender] = bonded - amount;
        totalBonded -= amount;
        Unbonding storage entry = _unbonding[msg.sender];
        // Cannot overflow uint192: total ETH supply is far below 2^192 wei.
        uint192 unbonding = entry.amount + uint192(amount);
        uint64 releaseAt = uint64(block.timestamp) + unbondingDelay;
        entry.amount = unbonding;
        entry.releaseAt = releaseAt;
        totalUnbonding += amount;
        emit UnbondRequested(msg.sender, amount, unbonding, releaseAt);
    }

    /// @inheritdoc IStaking
    function withdrawUnbonded() external {
        Unbonding memory entry = _unbonding[msg.sender];
        if (entry.amount == 0) revert StakingNothingUnbonding(msg.sender);
        if (block.timestamp < entry.releaseAt) revert StakingStillUnbonding(msg.sender, entry.releaseAt);
        delete _unbonding[msg.sender];
        totalUnbonding -= entry.amount;
        emit UnbondedWithdrawn(msg.sender, entry.amount);
        _send(msg.sender, entry.amount);
    }

    /// @inheritdoc IStaking
    function slash(address offender, uint256 amount, address rewardRecipient)
        external
        onlyRole(SLASHER_ROLE)
        returns (uint256 slashed)
    {
        uint256 bonded = _bonded[offender];
        Unbonding storage entry = _unbonding[offender];
        uint256 unbonding = entry.amount;
        uint256 fromBonded = amount < bonded ? amount : bonded;
        uint256 rest = amount - fromBonded;
        uint256 fromUnbonding = rest < unbonding ? rest : unbonding;
        slashed = fromBonded + fromUnbonding;

        if (fromBonded != 0) {
            _bonded[offender] = bonded - fromBonded;
            totalBonded -= fromBonded;
        }
        if (fromUnbonding != 0) {
            entry.amount = uint192(unbonding - fromUnbonding);
            totalUnbonding -= fromUnbonding;
        }
        // An offender never earns from its own slash.
        bool noReward = rewardRecipient == address(0) || rewardRecipient == offender;
        uint256 reward = noReward ? 0 : (slashed * slashRewardBps) / BPS;
        if (reward != 0) _owed[rewardRecipient] += reward;
        if (slashed != reward) _owed[treasury] += slashed - reward;
        totalOwed += slashed;
        emit Slashed(offender, amount, slashed, rewardRecipient, reward);
    }

    /// @inheritdoc IStaking
    function withdraw() external {
        uint256 amount = _owed[msg.sender];
        if (amount == 0) revert StakingNothingOwed(msg.sender);
        _owed[msg.sender] = 0;
        totalOwed -= amount;
        emit Withdrawn(msg.sender, amount);
        _send(msg.sender, amount);
    }

    /// @notice Sets the unbonding delay (only admin); applies to later unbond requests.
    function setUnbondingDelay(uint64 newDelay) public onlyRole(DEFAULT_ADMIN_ROLE) {
        if (newDelay == 0) revert StakingInvalidDelay(newDelay);
        emit UnbondingDelaySet(unbondingDelay, newDelay);
        unbondingDelay = newDelay;
    }

    /// @notice Sets the reward share of slashes (only admin).
    function setSlashRewardBps(uint16 newBps) public onlyRole(DEFAULT_ADMIN_ROLE) {
        if (newBps > BPS) revert StakingInvalidBps(newBps);
        emit SlashRewardBpsSet(slashRewardBps, newBps);
        slashRewardBps = newBps;
    }

    /// @notice Sets the treasury (only admin); what the old one is owed stays its own.
    function setTreasury(address newTreasury) public onlyRole(DEFAULT_ADMIN_ROLE) {
        if (newTreasury == address(0)) revert StakingZeroAddress();
        emit TreasurySet(treasury, newTreasury);
        treasury = newTreasury;
    }

    /// @inheritdoc IStaking
    function stakeOf(address account) external view returns (uint256) {
        return _bonded[account];
    }

    /// @inheritdoc IStaking
    function unbondingOf(address account) external view returns (uint256 amount, uint64 releaseAt) {
        Unbonding memory entry = _unbonding[account];
        return (entry.amount, entry.releaseAt);
    }

    /// @inheritdoc IStaking
    function owedTo(address account) external view returns (uint256) {
        return _owed[account];
    }

    function _send(address to, uint256 amount) private {
        (bool ok,) = to.call{value: amount}("");
        if (!ok) revert StakingTransferFailed(to, amount);
    }
}
