// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {MarketChecks} from "./MarketChecks.sol";

/// @notice Issue 32, "honest parties never lose": forge's invariant fuzzer drives MarketHandler's
/// honest and attacking parties through random sequences of actions at arbitrary times (deadline
/// and window boundaries +-1 s included) and checks every property of MarketChecks after every
/// call. Runs and depth: foundry.toml's [invariant] (scripts/test.sh runs it in CI).
contract HonestPartiesNeverLoseTest is MarketChecks {
    struct FuzzSelector {
        address addr;
        bytes4[] selectors;
    }

    /// forge: only the handler is called, and only its actions.
    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(h);
    }

    function targetSelectors() public view returns (FuzzSelector[] memory targets) {
        bytes4[] memory s = new bytes4[](31);
        s[0] = h.createJob.selector;
        s[1] = h.commit.selector;
        s[2] = h.finalize.selector;
        s[3] = h.refundExpired.selector;
        s[4] = h.failJob.selector;
        s[5] = h.requestCancel.selector;
        s[6] = h.cancel.selector;
        s[7] = h.slashSignedResult.selector;
        s[8] = h.challengeJob.selector;
        s[9] = h.respond.selector;
        s[10] = h.escalate.selector;
        s[11] = h.vote.selector;
        s[12] = h.resolve.selector;
        s[13] = h.settle.selector;
        s[14] = h.claimTimeout.selector;
        s[15] = h.mineBlocks.selector;
        s[16] = h.stake.selector;
        s[17] = h.requestUnbond.selector;
        s[18] = h.withdrawUnbonded.selector;
        s[19] = h.withdrawSlashRewards.selector;
        s[20] = h.withdrawEscrow.selector;
        s[21] = h.withdrawChallenges.selector;
        s[22] = h.withdrawLeases.selector;
        s[23] = h.startLease.selector;
        s[24] = h.confirmDelivery.selector;
        s[25] = h.endLease.selector;
        s[26] = h.toggleActive.selector;
        s[27] = h.setHonestPace.selector;
        s[28] = h.warp.selector;
        s[29] = h.warpToBoundary.selector;
        s[30] = h.mineBlocks.selector;
        targets = new FuzzSelector[](1);
        targets[0] = FuzzSelector(address(h), s);
    }

    function invariant_honestPartiesNeverLose() public view {
        checkHonestPartiesNeverLose();
    }
}
