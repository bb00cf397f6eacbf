// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {Cheats} from "./Cheats.sol";
import {MarketChecks} from "./MarketChecks.sol";
import {IJobEscrow} from "../../contracts/interfaces/IJobEscrow.sol";
import {ChallengeManager} from "../../contracts/ChallengeManager.sol";

/// @notice Fixed sequences of the invariant test's actions: attacks the fuzzer must catch,
/// replayed deterministically (each ends by checking every invariant).
contract ScenariosTest is MarketChecks {
    /// An honest provider that answers every challenge is never slashed, even when it answers at
    /// the last second of its response window.
    function test_lastSecondAnswerKeepsTheHonestProviderWhole() public {
        h.setHonestPace(false);
        h.createJob(0, 0, 0.5 ether, 1 days); // R0 funds a job for P0
        h.commit(0, 0);
        h.challengeJob(0, 0, 1, 0); // A challenges the right result
        h.warpExactly(d.RESPONSE_WINDOW() + 1); // P0 answers at the deadline on the way
        h.claimTimeout(0, 3);
        h.escalate(0);
        h.vote(0, true, true); // P1's stake votes the honest provider at fault
        h.warpExactly(d.VOTE_WINDOW() + 1); // honest voters vote at the last second on the way
        h.resolve(0, 3);
        h.warpExactly(d.CHALLENGE_WINDOW());
        h.finalize(0, 3);
        checkHonestPartiesNeverLose();
        require(
            d.escrow().jobState(h.job(0).id).status == IJobEscrow.JobStatus.Finalized, "the honest provider's job was not paid"
        );
    }
}

/// @notice Attacks the contracts do not stop yet (docs/THREATS.md, "Open findings"): each test
/// performs one and fails until it is defended. scripts/test.sh leaves this contract out
/// (`--no-match-contract Open`); run it with `forge test --match-contract ScenariosOpenTest`.
contract ScenariosOpenTest is MarketChecks, Cheats {
    /// The attacker challenges a wrong result in the block of its commit (colluding with the
    /// provider, before the honest renter can), the provider answers at its last second, the
    /// attacker never escalates and settles once the job's challenge window is over: the job
    /// then finalizes and the honest renter pays for the wrong result.
    function test_colludingChallengerCannotShieldAWrongResult() public {
        h.createJob(0, 1, 0.5 ether, 1 days); // R0 funds a job for P1
        h.commit(0, 1); // P1 commits a wrong result
        // A challenges it first, in the commit's block (the handler's A leaves this attack out
        // while it is open: MarketHandler.SHIELD_ATTACK).
        address attacker = h.A();
        IJobEscrow.Job memory wrong = h.job(0);
        ChallengeManager challenges = d.challenges();
        uint256 bond = d.MIN_BOND();
        vm.deal(attacker, bond);
        vm.prank(attacker);
        challenges.challengeJob{value: bond}(wrong, 1);
        h.warpExactly(d.RESPONSE_WINDOW());
        h.respond(0, false); // P1 answers (it can open its own root) at its deadline
        h.warpExactly(d.ESCALATION_WINDOW() + 1);
        h.settle(0, 3); // A's bond goes to P1, the escrow is released
        h.warpExactly(d.CHALLENGE_WINDOW());
        h.finalize(0, 3);
        checkHonestPartiesNeverLose();
    }
}
