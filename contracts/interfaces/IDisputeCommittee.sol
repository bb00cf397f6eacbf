// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Receiver of a dispute's verdict (the contract that opened the dispute)
interface IDisputeResolver {
    /// @notice Called once by the committee when dispute `ref` (the opener's own id, e.g. a
    /// challenge id) is resolved.
    function onDisputeResolved(uint256 ref, IDisputeCommittee.Verdict verdict) external;
}

/// @title Committee vote of staked verifiers on a disputed job challenge
/// @notice An opener (OPENER_ROLE, the ChallengeManager, granted once at deployment by
/// IOneTimeWiring) opens a dispute between a challenger
/// and a provider. During the vote window every account with at least minVoterStake bonded in
/// Staking, other than the two parties, votes once with weight = its bonded stake at vote time.
/// After the window anyone resolves: below the quorum weight, or on a tie, no fault is found;
/// otherwise the weight majority decides. The verdict is delivered to the opener once.
interface IDisputeCommittee {
    enum Verdict {
        None, // not resolved yet
        NoFault, // no quorum or a tie: nobody at fault
        ProviderAtFault,
        ChallengerWrong
    }

    struct Dispute {
        address opener; // receives the verdict (IDisputeResolver)
        uint64 voteEnd; // unix seconds; votes allowed until and including voteEnd
        bool resolved;
        Verdict verdict;
        uint256 ref; // the opener's id for the dispute
        address challenger;
        address provider;
        uint256 weightProviderAtFault;
        uint256 weightChallengerWrong;
    }

    event DisputeOpened(
        uint256 indexed disputeId, address indexed opener, uint256 indexed ref, address challenger, address provider,
        uint256 voteEnd
    );
    event Voted(uint256 indexed disputeId, address indexed voter, bool providerAtFault, uint256 weight);
    event DisputeResolved(
        uint256 indexed disputeId, Verdict verdict, uint256 weightProviderAtFault, uint256 weightChallengerWrong
    );

    error DisputeCommitteeZeroAddress();
    error DisputeCommitteeInvalidVoteWindow(uint256 voteWindow, uint256 maxVoteWindow);
    error DisputeCommitteeUnknownDispute(uint256 disputeId);
    error DisputeCommitteeVoteClosed(uint256 disputeId, uint256 voteEnd);
    error DisputeCommitteeVoteStillOpen(uint256 disputeId, uint256 voteEnd);
    error DisputeCommitteePartyCannotVote(uint256 disputeId, address voter);
    error DisputeCommitteeVoterNotStaked(address voter, uint256 stake, uint256 required);
    error DisputeCommitteeAlreadyVoted(uint256 disputeId, address voter);
    error DisputeCommitteeAlreadyResolved(uint256 disputeId);

    /// @notice Grants OPENER_ROLE to `openers`, once, by the deployer; afterwards nobody can
    /// grant or revoke any role.
    function wire(address[] calldata openers) external;

    /// @notice Opens a dispute; only OPENER_ROLE. The caller receives the verdict.
    /// @return disputeId the new dispute's id (from 1)
    function open(uint256 ref, address challenger, address provider) external returns (uint256 disputeId);

    /// @notice Casts the caller's vote with its current bonded stake as weight.
    function vote(uint256 disputeId, bool providerAtFault) external;

    /// @notice After the vote window: decides and delivers the verdict to the opener. Anyone.
    function resolve(uint256 disputeId) external returns (Verdict verdict);

    /// @notice Everything stored about dispute `disputeId`.
    function dispute(uint256 disputeId) external view returns (Dispute memory);

    /// @notice True when `voter` has voted in dispute `disputeId`.
    function hasVoted(uint256 disputeId, address voter) external view returns (bool);

    /// @notice Seconds a dispute stays open for votes (at most MAX_VOTE_WINDOW).
    function voteWindow() external view returns (uint64);

    /// @notice Smallest total vote weight for a verdict other than NoFault.
    function quorumWeight() external view returns (uint256);

    /// @notice Bonded stake an account needs to vote.
    function minVoterStake() external view returns (uint256);
}
