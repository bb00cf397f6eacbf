// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {Staking} from "../../contracts/Staking.sol";
import {ProviderRegistry} from "../../contracts/ProviderRegistry.sol";
import {JobEscrow} from "../../contracts/JobEscrow.sol";
import {LeaseManager} from "../../contracts/LeaseManager.sol";
import {ProofOfGpu} from "../../contracts/ProofOfGpu.sol";
import {DisputeCommittee} from "../../contracts/DisputeCommittee.sol";
import {ChallengeManager} from "../../contracts/ChallengeManager.sol";
import {IChallengeManager} from "../../contracts/interfaces/IChallengeManager.sol";
import {IProviderActivity} from "../../contracts/interfaces/IProviderActivity.sol";
import {IProviderRegistry} from "../../contracts/interfaces/IProviderRegistry.sol";
import {IStaking} from "../../contracts/interfaces/IStaking.sol";

/// @notice The contract set deployed and wired as unchained_cli/deploy.py deploy_all does, with
/// its DeployParams defaults (the treasury is an address of its own here, not the deployer). The
/// unbonding delay is 8 days, the default that covers the longest job plus a challenge window
/// (JobEscrow's constructor requires it once signed results bind a commit).
contract Deployment {
    uint256 internal constant DAY = 1 days;
    uint256 internal constant HOUR = 1 hours;

    uint256 public constant MIN_PROVIDER_STAKE = 1 ether;
    uint256 public constant MIN_VERIFIER_STAKE = 1 ether;
    uint64 public constant UNBONDING_DELAY = 8 days;
    uint16 public constant SLASH_REWARD_BPS = 5_000;
    uint16 public constant PROTOCOL_FEE_BPS = 200;
    uint64 public constant CHALLENGE_WINDOW = 1 hours;
    uint64 public constant MAX_JOB_DURATION = 7 days;
    uint64 public constant CANCEL_GRACE = 10 minutes;
    uint64 public constant POG_COMMIT_WINDOW = 10 minutes;
    uint64 public constant ROOT_CHALLENGE_PERIOD = 1 days;
    uint256 public constant MIN_BOND = 0.1 ether;
    uint64 public constant RESPONSE_WINDOW = 30 minutes;
    uint64 public constant FRAUD_WINDOW = 30 minutes;
    uint64 public constant VOTE_WINDOW = 1 hours;
    uint64 public constant ESCALATION_WINDOW = 30 minutes;
    uint256 public constant SLASH_AMOUNT = 1 ether;
    uint256 public constant FALSE_CLAIM_SLASH = 0.5 ether;
    uint256 public constant QUORUM_STAKE = 1 ether;

    Staking public staking;
    ProviderRegistry public registry;
    JobEscrow public escrow;
    LeaseManager public leases;
    ProofOfGpu public pog;
    DisputeCommittee public committee;
    ChallengeManager public challenges;

    constructor(address treasury) {
        staking = new Staking(UNBONDING_DELAY, SLASH_REWARD_BPS, treasury);
        registry = new ProviderRegistry(IStaking(address(staking)), MIN_PROVIDER_STAKE);
        escrow = new JobEscrow(
            IProviderRegistry(address(registry)),
            treasury,
            CHALLENGE_WINDOW,
            PROTOCOL_FEE_BPS,
            MAX_JOB_DURATION,
            CANCEL_GRACE
        );
        leases = new LeaseManager(IProviderRegistry(address(registry)));
        pog = new ProofOfGpu(
            IStaking(address(staking)),
            IProviderRegistry(address(registry)),
            MIN_VERIFIER_STAKE,
            POG_COMMIT_WINDOW,
            ROOT_CHALLENGE_PERIOD
        );
        committee = new DisputeCommittee(IStaking(address(staking)), MIN_VERIFIER_STAKE, QUORUM_STAKE, VOTE_WINDOW);
        challenges = new ChallengeManager(
            IChallengeManager.Config({
                staking: address(staking),
                pog: address(pog),
                escrow: address(escrow),
                committee: address(committee),
                treasury: treasury,
                minBond: MIN_BOND,
                minVerifierStake: MIN_VERIFIER_STAKE,
                slashAmount: SLASH_AMOUNT,
                falseClaimSlash: FALSE_CLAIM_SLASH,
                feeBps: PROTOCOL_FEE_BPS,
                responseWindow: RESPONSE_WINDOW,
                fraudWindow: FRAUD_WINDOW,
                escalationWindow: ESCALATION_WINDOW
            })
        );
        // The roles deploy_all grants, once.
        staking.wire(
            _pair(address(challenges), address(escrow)), _pair(address(escrow), address(leases)), _one(address(escrow))
        );
        escrow.wire(_one(address(challenges)));
        registry.wire(_one(address(pog)), IProviderActivity(address(escrow)));
        committee.wire(_one(address(challenges)));
    }

    function _one(address a) private pure returns (address[] memory list) {
        list = new address[](1);
        list[0] = a;
    }

    function _pair(address a, address b) private pure returns (address[] memory list) {
        list = new address[](2);
        list[0] = a;
        list[1] = b;
    }
}
