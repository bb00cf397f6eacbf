// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

/// @title PullBalances
/// @notice The withdrawal every ledger here shares (Staking, LeaseManager, ChallengeManager,
/// JobEscrow): an account pulls its whole balance itself, checks-effects-interactions (the
/// balance is zeroed and the ledger's Withdrawn event emitted, then the money is sent), so a
/// payee that reverts or re-enters blocks nobody else's payment.
/// @dev The ledger keeps its balances in its own layout (JobEscrow packs flags beside them,
/// Staking keeps a total) and names its own event and errors (each interface declares them):
/// it supplies them through the two hooks below. Unused functions cost no bytecode, so an
/// ETH-only ledger carries no token transfer.
abstract contract PullBalances {
    using SafeERC20 for IERC20;

    /// @dev Pays the caller its whole ETH balance, if it has one; returns the amount (zero: nothing
    /// was written or sent, the caller decides whether that is an error).
    function _withdrawEth() internal returns (uint256 amount) {
        amount = _debitAll(address(0), msg.sender);
        if (amount != 0) _sendEth(msg.sender, amount);
    }

    /// @dev As _withdrawEth for the balance in `token` (address(0): ETH).
    function _withdraw(address token) internal returns (uint256 amount) {
        if (token == address(0)) return _withdrawEth();
        amount = _debitAll(token, msg.sender);
        if (amount != 0) IERC20(token).safeTransfer(msg.sender, amount);
    }

    /// @dev Sends `amount` wei to `to`, reverting with the ledger's error if it refuses them. The
    /// payee's reply is not copied: it cannot make the payer pay for a large one.
    function _sendEth(address to, uint256 amount) internal {
        bool ok;
        assembly ("memory-safe") {
            ok := call(gas(), to, amount, 0, 0, 0, 0)
        }
        if (!ok) _revertTransferFailed(to, amount);
    }

    /// @dev Zeroes `account`'s balance in `token`, emits the ledger's Withdrawn event and returns
    /// the amount; writes and emits nothing when it is zero. An ETH-only ledger is only asked for
    /// token zero.
    function _debitAll(address token, address account) internal virtual returns (uint256 amount);

    /// @dev Reverts with the ledger's error for an ETH transfer `to` refused.
    function _revertTransferFailed(address to, uint256 amount) internal pure virtual;
}
