// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

/// @title ReentrantWithdrawer
/// @notice Attacker for tests: acts on a target through `execute` (staking, funding, ending a
/// lease...) and, when paid ETH, calls `reentryData` on the target again up to `maxReentries`
/// times, recording whether each re-entry succeeded instead of reverting, so the outer payment
/// still goes through and a test can see what the re-entry achieved. With `rejectPayments` set it
/// refuses ETH instead, to exercise failed transfers.
contract ReentrantWithdrawer {
    error ReentrantWithdrawerRejected();

    address public target;
    bytes public reentryData;
    uint256 public maxReentries;
    uint256 public reentryAttempts;
    uint256 public reentrySuccesses;
    bool public rejectPayments;

    event ReentryAttempted(bool success, bytes returnData);

    function arm(address target_, bytes calldata reentryData_, uint256 maxReentries_) external {
        target = target_;
        reentryData = reentryData_;
        maxReentries = maxReentries_;
    }

    function setRejectPayments(bool reject) external {
        rejectPayments = reject;
    }

    /// @notice Calls `target` with `data` and `value` (forwarded from this contract's balance).
    function execute(address target_, bytes calldata data, uint256 value) external payable returns (bytes memory) {
        (bool ok, bytes memory ret) = target_.call{value: value}(data);
        if (!ok) {
            assembly {
                revert(add(ret, 32), mload(ret))
            }
        }
        return ret;
    }

    receive() external payable {
        if (rejectPayments) revert ReentrantWithdrawerRejected();
        if (reentryAttempts < maxReentries) {
            ++reentryAttempts;
            (bool ok, bytes memory ret) = target.call(reentryData);
            if (ok) ++reentrySuccesses;
            emit ReentryAttempted(ok, ret);
        }
    }
}
