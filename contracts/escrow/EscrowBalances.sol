// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IJobEscrow} from "../interfaces/IJobEscrow.sol";
import {IProviderActivity} from "../interfaces/IProviderActivity.sol";
import {IProviderRegistry} from "../interfaces/IProviderRegistry.sol";
import {IStakeLocker} from "../interfaces/IStakeLocker.sol";
import {IStakeWatcher} from "../interfaces/IStakeWatcher.sol";
import {IStaking} from "../interfaces/IStaking.sol";
import {PullBalances} from "../mixins/PullBalances.sol";

/// @title EscrowBalances
/// @notice JobEscrow's funds vault and its providers' standing: pull balances per (token,
/// account), and beside a provider's ETH balance its open-job count (the stake lock Staking asks
/// for, IStakeLocker), whether the registry has it active (IProviderActivity) and whether its
/// stake can back a job (IStakeWatcher).
/// @dev Pull balances share a slot with a flag that stays set once credited (a withdrawal then
/// rewrites a live slot instead of emptying it, so the next credit costs 5,000 gas instead of
/// 22,100), and a provider's open-job count and activity flags sit in its ETH balance slot: an
/// ETH payout writes the count with the balance, and funding a job reads one slot of this
/// contract instead of calling the registry and Staking.
abstract contract EscrowBalances is IJobEscrow, PullBalances {
    /// @dev A pull balance of one (token, account). `openJobs`, `active` and `bonded` are used in
    /// the ETH (token zero) entry of a provider only: its committed jobs not yet paid or refunded,
    /// whether it is registered and not deactivated (the registry tells), and whether its stake
    /// can back a job (minimum bonded, nothing unbonding: Staking tells, IStakeWatcher). `used` is
    /// set by the first credit and never cleared. uint176 holds any balance: each job is at most
    /// MAX_PRICE (2^80) and there are fewer than 2^56 jobs.
    struct Balance {
        uint176 owed;
        uint56 openJobs;
        bool used;
        bool active;
        bool bonded;
    }

    IProviderRegistry public immutable registry;
    /// @notice The registry's Staking: a committing provider's stake is checked there; the lock is
    /// this contract's open-job count, which Staking reads before any unbond (lockedWorkOf).
    IStaking public immutable staking;
    /// @notice The registry's minimum provider stake, required and locked at commit.
    uint256 public immutable minProviderStake;
    /// @inheritdoc IJobEscrow
    address public immutable treasury;

    mapping(address token => mapping(address account => Balance)) internal _balances;

    constructor(IProviderRegistry registry_, address treasury_) {
        if (address(registry_) == address(0) || treasury_ == address(0)) revert JobEscrowZeroAddress();
        registry = registry_;
        staking = registry_.staking();
        minProviderStake = registry_.minProviderStake();
        treasury = treasury_;
        // Every finalization credits the treasury's fee: its ETH slot is made live here, once, at
        // the deployer's cost, instead of by the first job's finalization (22,100 gas, not 5,000).
        _balances[address(0)][treasury_].used = true;
    }

    /// @inheritdoc IProviderActivity
    /// @dev An inactive provider's `bonded` is not kept up to date (stakeChanged skips it, so
    /// that verifiers' stakes write nothing here): it is read from Staking when it becomes active.
    function setProviderActive(address provider, bool active) external {
        if (msg.sender != address(registry)) revert JobEscrowNotRegistry(msg.sender);
        Balance storage standing = _balances[address(0)][provider];
        if (active) {
            (standing.active, standing.bonded) = (true, staking.isBondedFor(provider, minProviderStake));
        } else {
            standing.active = false;
        }
    }

    /// @inheritdoc IStakeWatcher
    function stakeChanged(address account, uint256 bonded, bool unbonding) external {
        if (msg.sender != address(staking)) revert JobEscrowNotStaking(msg.sender);
        Balance storage standing = _balances[address(0)][account];
        if (!standing.active) return;
        bool backed = bonded >= minProviderStake && !unbonding;
        if (standing.bonded != backed) standing.bonded = backed;
    }

    /// @inheritdoc IJobEscrow
    function withdraw(address token) external {
        if (_withdraw(token) == 0) revert JobEscrowNothingOwed(token, msg.sender);
    }

    /// @inheritdoc IJobEscrow
    function isProviderActive(address provider) external view returns (bool) {
        return _balances[address(0)][provider].active;
    }

    /// @inheritdoc IJobEscrow
    function owedTo(address token, address account) external view returns (uint256) {
        return _balances[token][account].owed;
    }

    /// @inheritdoc IStakeLocker
    /// @dev The provider's committed jobs not yet paid or refunded (frozen ones included).
    function lockedWorkOf(address account) external view returns (uint256) {
        return _balances[address(0)][account].openJobs;
    }

    /// @dev Accepts `count` jobs just committed by `provider`: its bonded stake must be at least
    /// the minimum (Staking's own error, as its lock gave before), and they count as open work,
    /// which Staking reads before any unbond, until each is paid or refunded.
    function _lock(address provider, uint256 count) internal {
        uint256 bonded = staking.stakeOf(provider);
        if (bonded < minProviderStake) revert IStaking.StakingBelowMinimum(provider, bonded, minProviderStake);
        // count <= MAX_BATCH_SIZE and the total stays below the number of jobs: fits in uint56.
        _balances[address(0)][provider].openJobs += uint56(count);
    }

    /// @dev Releases one open job of `provider` that ends without a payout (refunded).
    function _release(address provider) internal {
        _balances[address(0)][provider].openJobs -= 1;
    }

    /// @dev Credits `provider` its payout and releases `released` of its open jobs: for ETH one
    /// slot holds both, so a payout writes it once.
    function _pay(address token, address provider, uint256 payout, uint256 released) internal {
        Balance storage eth = _balances[address(0)][provider];
        if (token == address(0)) {
            // payout is at most MAX_BATCH_SIZE prices of at most MAX_PRICE: fits in uint176.
            (eth.owed, eth.openJobs, eth.used) = (eth.owed + uint176(payout), eth.openJobs - uint56(released), true);
        } else {
            eth.openJobs -= uint56(released);
            _credit(token, provider, payout);
        }
    }

    function _credit(address token, address account, uint256 amount) internal {
        if (amount == 0) return;
        Balance storage balance = _balances[token][account];
        // amount is at most MAX_BATCH_SIZE prices of at most MAX_PRICE: fits in uint176.
        (balance.owed, balance.used) = (balance.owed + uint176(amount), true);
    }

    /// @dev PullBalances: leaves the slot's flags (and a provider's open-job count): see Balance.
    function _debitAll(address token, address account) internal override returns (uint256 amount) {
        Balance storage balance = _balances[token][account];
        amount = balance.owed;
        if (amount == 0) return 0;
        balance.owed = 0;
        emit Withdrawn(token, account, amount);
    }

    function _revertTransferFailed(address to, uint256 amount) internal pure override {
        revert JobEscrowTransferFailed(to, amount);
    }
}
