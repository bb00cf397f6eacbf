// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {OneTimeWiring} from "./access/OneTimeWiring.sol";
import {IDisputeCommittee, IDisputeResolver} from "./interfaces/IDisputeCommittee.sol";
import {IStaking} from "./interfaces/IStaking.sol";

/// @title Stake-weighted committee vote on job disputes
/// @notice The deployer grants OPENER_ROLE to the ChallengeManager once (OneTimeWiring).
/// Parameters are fixed at deployment.
/// @dev Where the design is silent: a tie counts as no fault found; the job's renter is not
/// excluded from voting unless it is the challenger (the committee does not know the job).
contract DisputeCommittee is IDisputeCommittee, OneTimeWiring {
    /// @notice Role of contracts allowed to open disputes (the ChallengeManager).
    bytes32 public constant OPENER_ROLE = keccak256("OPENER_ROLE");
    /// @notice Longest vote window a deployment may set.
    uint64 public constant MAX_VOTE_WINDOW = 7 days;

    /// @notice Staking contract whose bonded stake is a voter's weight.
    IStaking public immutable staking;
    /// @inheritdoc IDisputeCommittee
    uint256 public immutable minVoterStake;
    /// @inheritdoc IDisputeCommittee
    uint256 public immutable quorumWeight;
    /// @inheritdoc IDisputeCommittee
    uint64 public immutable voteWindow;

    /// @notice Number of disputes opened so far (the last dispute id).
    uint256 public disputeCount;
    mapping(uint256 disputeId => Dispute) private _disputes;
    mapping(uint256 disputeId => mapping(address voter => bool)) private _voted;

    /// @param staking_ Staking contract (voter weights)
    /// @param minVoterStake_ wei a voter must have bonded
    /// @param quorumWeight_ smallest total weight (wei of stake) for a verdict
    /// @param voteWindow_ seconds a dispute stays open for votes, 1..MAX_VOTE_WINDOW
    constructor(IStaking staking_, uint256 minVoterStake_, uint256 quorumWeight_, uint64 voteWindow_) {
        if (address(staking_) == address(0)) revert DisputeCommitteeZeroAddress();
        if (voteWindow_ == 0 || voteWindow_ > MAX_VOTE_WINDOW) {
            revert DisputeCommitteeInvalidVoteWindow(voteWindow_, MAX_VOTE_WINDOW);
        }
        staking = staking_;
        minVoterStake = minVoterStake_;
        quorumWeight = quorumWeight_;
        voteWindow = voteWindow_;
    }

    /// @inheritdoc IDisputeCommittee
    function wire(address[] calldata openers) external wiring {
        _grantAll(OPENER_ROLE, openers);
    }

    /// @inheritdoc IDisputeCommittee
    function open(uint256 ref, address challenger, address provider)
        external
        onlyRole(OPENER_ROLE)
        returns (uint256 disputeId)
    {
        disputeId = ++disputeCount;
        uint64 voteEnd = uint64(block.timestamp) + voteWindow;
        Dispute storage d = _disputes[disputeId];
        d.opener = msg.sender;
        d.voteEnd = voteEnd;
        d.ref = ref;
        d.challenger = challenger;
        d.provider = provider;
        emit DisputeOpened(disputeId, msg.sender, ref, challenger, provider, voteEnd);
    }

    /// @inheritdoc IDisputeCommittee
    function vote(uint256 disputeId, bool providerAtFault) external {
        Dispute storage d = _existing(disputeId);
        if (block.timestamp > d.voteEnd) revert DisputeCommitteeVoteClosed(disputeId, d.voteEnd);
        if (msg.sender == d.challenger || msg.sender == d.provider) {
            revert DisputeCommitteePartyCannotVote(disputeId, msg.sender);
        }
        if (_voted[disputeId][msg.sender]) revert DisputeCommitteeAlreadyVoted(disputeId, msg.sender);
        uint256 weight = staking.stakeOf(msg.sender);
        if (weight < minVoterStake || weight == 0) {
            revert DisputeCommitteeVoterNotStaked(msg.sender, weight, minVoterStake);
        }
        _voted[disputeId][msg.sender] = true;
        if (providerAtFault) d.weightProviderAtFault += weight;
        else d.weightChallengerWrong += weight;
        emit Voted(disputeId, msg.sender, providerAtFault, weight);
    }

    /// @inheritdoc IDisputeCommittee
    function resolve(uint256 disputeId) external returns (Verdict verdict) {
        Dispute storage d = _existing(disputeId);
        if (d.resolved) revert DisputeCommitteeAlreadyResolved(disputeId);
        if (block.timestamp <= d.voteEnd) revert DisputeCommitteeVoteStillOpen(disputeId, d.voteEnd);
        uint256 forFault = d.weightProviderAtFault;
        uint256 against = d.weightChallengerWrong;
        if (forFault + against < quorumWeight || forFault == against) verdict = Verdict.NoFault;
        else if (forFault > against) verdict = Verdict.ProviderAtFault;
        else verdict = Verdict.ChallengerWrong;
        d.resolved = true;
        d.verdict = verdict;
        emit DisputeResolved(disputeId, verdict, forFault, against);
        IDisputeResolver(d.opener).onDisputeResolved(d.ref, verdict);
    }

    /// @inheritdoc IDisputeCommittee
    function dispute(uint256 disputeId) external view returns (Dispute memory) {
        return _existing(disputeId);
    }

    /// @inheritdoc IDisputeCommittee
    function hasVoted(uint256 disputeId, address voter) external view returns (bool) {
        return _voted[disputeId][voter];
    }

    function _existing(uint256 disputeId) private view returns (Dispute storage d) {
        d = _disputes[disputeId];
        if (d.opener == address(0)) revert DisputeCommitteeUnknownDispute(disputeId);
    }
}
