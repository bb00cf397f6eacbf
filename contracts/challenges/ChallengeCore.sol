// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IChallengeManager} from "../interfaces/IChallengeManager.sol";
import {IDisputeCommittee} from "../interfaces/IDisputeCommittee.sol";
import {IProofOfGpu} from "../interfaces/IProofOfGpu.sol";
import {IJobEscrow} from "../interfaces/IJobEscrow.sol";
import {IStaking} from "../interfaces/IStaking.sol";
import {MerkleProofLib} from "../libraries/MerkleProofLib.sol";
import {PogMath} from "../libraries/PogMath.sol";
import {PullBalances} from "../mixins/PullBalances.sol";

/// @title ChallengeCore
/// @notice What every challenge shares, whatever it challenges: the parameters, the bond and its
/// randomness at the opening, the provider's answer, the timeout, settlement, and the bonds paid
/// out as pull balances. The kinds (PogChallenges, JobChallenges) open challenges and add their
/// own endings; they say through two hooks what a provider's fault means for their subject.
/// @dev R = keccak256(blockhash(anchorBlock - 1), challengeId), stored when the challenge opens
/// (anchorBlock is the opening block). It never changes and never expires, so nobody, the
/// challenged provider included, can draw again by waiting: the provider learns one set of
/// indices and answers it or is slashed. Only the challenger knew R when sending; choosing it
/// helps no honest party (an honest root answers every index), and the root was committed before
/// that block existed.
abstract contract ChallengeCore is IChallengeManager, PullBalances {
    uint256 internal constant MAX_K = 64;
    uint256 private constant BPS = 10_000;
    uint256 private constant JOB_LEAF_BYTES = 32;
    /// @notice Largest treasury share of a bond paid to a provider (Config.feeBps).
    uint16 public constant MAX_FEE_BPS = 1_000;

    /// @notice Stake checks and slashing (this contract holds SLASHER_ROLE there).
    IStaking public immutable staking;
    /// @notice Proof-of-GPU rounds: roots, n and GPU seeds.
    IProofOfGpu public immutable pog;
    /// @notice Job escrow: freeze and resolveFreeze (this contract holds DISPUTE_ROLE there).
    IJobEscrow public immutable escrow;
    /// @notice Committee that votes on escalated job challenges (this contract holds OPENER_ROLE).
    IDisputeCommittee public immutable committee;
    /// @inheritdoc IChallengeManager
    address public immutable treasury;
    /// @inheritdoc IChallengeManager
    uint256 public immutable minBond;
    /// @inheritdoc IChallengeManager
    uint256 public immutable minVerifierStake;
    /// @inheritdoc IChallengeManager
    uint256 public immutable slashAmount;
    /// @inheritdoc IChallengeManager
    uint256 public immutable falseClaimSlash;
    /// @inheritdoc IChallengeManager
    uint16 public immutable feeBps;
    /// @inheritdoc IChallengeManager
    uint64 public immutable responseWindow;
    /// @inheritdoc IChallengeManager
    uint64 public immutable fraudWindow;
    /// @inheritdoc IChallengeManager
    uint64 public immutable escalationWindow;

    /// @inheritdoc IChallengeManager
    uint256 public challengeCount;

    mapping(uint256 challengeId => Challenge) internal _challenges;
    mapping(address account => uint256) private _owed;

    /// @param config addresses and parameters; see IChallengeManager.Config for each field
    constructor(Config memory config) {
        if (
            config.staking == address(0) || config.pog == address(0) || config.escrow == address(0)
                || config.committee == address(0) || config.treasury == address(0)
        ) revert ChallengeZeroAddress();
        if (config.feeBps > MAX_FEE_BPS) revert ChallengeBadFeeBps(config.feeBps);
        _checkWindows(config);
        staking = IStaking(config.staking);
        pog = IProofOfGpu(config.pog);
        escrow = IJobEscrow(config.escrow);
        committee = IDisputeCommittee(config.committee);
        treasury = config.treasury;
        minBond = config.minBond;
        minVerifierStake = config.minVerifierStake;
        slashAmount = config.slashAmount;
        falseClaimSlash = config.falseClaimSlash;
        feeBps = config.feeBps;
        responseWindow = config.responseWindow;
        fraudWindow = config.fraudWindow;
        escalationWindow = config.escalationWindow;
    }

    /// @dev Reverts unless every slash can land before the stake it targets leaves Staking: the
    /// longest path from the last moment a party can start unbonding (a provider while its PoG
    /// round is open, a challenger when it opens a job challenge) to its slash must be shorter
    /// than the unbonding delay. Job providers are also covered by JobEscrow's stake lock.
    function _checkWindows(Config memory config) private view {
        if (config.responseWindow == 0 || config.fraudWindow == 0 || config.escalationWindow == 0) {
            revert ChallengeZeroWindow();
        }
        IProofOfGpu pog_ = IProofOfGpu(config.pog);
        uint256 pogPath = uint256(pog_.commitWindow()) + pog_.rootChallengePeriod() + config.responseWindow
            + config.fraudWindow;
        uint256 jobPath = uint256(IJobEscrow(config.escrow).challengeWindow()) + config.responseWindow
            + config.escalationWindow + IDisputeCommittee(config.committee).voteWindow();
        uint256 exposure = pogPath > jobPath ? pogPath : jobPath;
        uint256 delay = IStaking(config.staking).unbondingDelay();
        if (exposure >= delay) revert ChallengeWindowsExceedUnbonding(exposure, delay);
    }

    /// @inheritdoc IChallengeManager
    function respond(uint256 challengeId, bytes[] calldata leaves, bytes32[][] calldata proofs) external {
        Challenge storage c = _existing(challengeId);
        if (msg.sender != c.provider) revert ChallengeNotProvider(challengeId, msg.sender);
        if (c.status != Status.Open) revert ChallengeWrongStatus(challengeId, c.status);
        if (block.timestamp > c.responseDeadline) revert ChallengeDeadlinePassed(challengeId, c.responseDeadline);
        uint256 k = c.k;
        if (leaves.length != k || proofs.length != k) {
            revert ChallengeWrongAnswerCount(challengeId, leaves.length, proofs.length, k);
        }
        _verifyAnswer(c, c.randomness, leaves, proofs);
        c.status = Status.Answered;
        c.answeredAt = uint40(block.timestamp);
        emit ChallengeAnswered(challengeId, msg.sender);
    }

    /// @inheritdoc IChallengeManager
    function claimTimeout(uint256 challengeId) external {
        Challenge storage c = _existing(challengeId);
        if (c.status != Status.Open) revert ChallengeWrongStatus(challengeId, c.status);
        if (block.timestamp <= c.responseDeadline) {
            revert ChallengeDeadlineNotPassed(challengeId, c.responseDeadline);
        }
        // R was stored at the opening: an honest provider could always learn its indices in time.
        emit ChallengeTimedOut(challengeId, c.provider);
        _faultProvider(challengeId, c, c.challenger);
    }

    /// @inheritdoc IChallengeManager
    function settle(uint256 challengeId) external {
        Challenge storage c = _existing(challengeId);
        if (c.status != Status.Answered) revert ChallengeWrongStatus(challengeId, c.status);
        bool pogKind = c.kind == Kind.Pog;
        uint256 windowEnd = uint256(c.answeredAt) + (pogKind ? fraudWindow : escalationWindow);
        if (block.timestamp <= windowEnd) revert ChallengeWindowOpen(challengeId, windowEnd);
        c.status = Status.Settled;
        emit ChallengeClosed(challengeId, Status.Settled);
        _payBondToProvider(challengeId, c);
        if (!pogKind) _releaseJob(c, false);
    }

    /// @inheritdoc IChallengeManager
    function withdraw() external {
        if (_withdrawEth() == 0) revert ChallengeNothingOwed(msg.sender);
    }

    /// @inheritdoc IChallengeManager
    function challenge(uint256 challengeId) external view returns (Challenge memory) {
        return _existing(challengeId);
    }

    /// @inheritdoc IChallengeManager
    function challengeIndices(uint256 challengeId) external view returns (uint256[] memory indices) {
        Challenge storage c = _existing(challengeId);
        bytes32 randomness = c.randomness;
        indices = new uint256[](c.k);
        for (uint256 t; t < indices.length; ++t) {
            indices[t] = PogMath.challengeIndex(randomness, c.root, t, c.leafCount);
        }
    }

    /// @inheritdoc IChallengeManager
    function owedTo(address account) external view returns (uint256) {
        return _owed[account];
    }

    /// @dev JobChallenges' hook, called for a job challenge only when it ends: unfreezes its job
    /// in the escrow (refunded when the provider is at fault).
    function _releaseJob(Challenge storage c, bool providerAtFault) internal virtual;

    /// @dev A PoG challenge's hook: true the first time the challenged root is faulted (it is
    /// recorded), false when it was already slashed for.
    function _markRootFaulted(Challenge storage c) internal virtual returns (bool first);

    /// @dev Opens a challenge with the sender's bond (msg.value) and fixes its randomness.
    function _open(
        Kind kind,
        address provider,
        uint256 subject,
        uint256 gpuIndex,
        bytes32 root,
        uint256 count,
        uint256 k
    ) internal returns (uint256 challengeId) {
        if (msg.value < minBond) revert ChallengeBondTooSmall(msg.value, minBond);
        challengeId = ++challengeCount;
        // The previous block's hash: the last one the EVM serves to this block (its own is unknown).
        bytes32 randomness = keccak256(abi.encode(blockhash(block.number - 1), challengeId));
        _challenges[challengeId] = Challenge({
            challenger: msg.sender,
            anchorBlock: uint64(block.number),
            kind: kind,
            status: Status.Open,
            k: uint8(k),
            provider: provider,
            responseDeadline: uint40(block.timestamp + responseWindow),
            answeredAt: 0,
            gpuIndex: uint8(gpuIndex),
            subject: subject,
            root: root,
            leafCount: count,
            randomness: randomness,
            bond: msg.value,
            disputeId: 0
        });
    }

    /// @dev Reverts unless leaves[t] is included at index_t for every t, with the kind's leaf size.
    function _verifyAnswer(
        Challenge storage c,
        bytes32 randomness,
        bytes[] calldata leaves,
        bytes32[][] calldata proofs
    ) private view {
        bytes32 root = c.root;
        uint256 count = c.leafCount;
        uint256 leafBytes = c.kind == Kind.Pog ? PogMath.CHUNK_BYTES : JOB_LEAF_BYTES;
        for (uint256 t; t < leaves.length; ++t) {
            if (leaves[t].length != leafBytes) revert ChallengeBadLeafLength(t, leaves[t].length, leafBytes);
            uint256 index = PogMath.challengeIndex(randomness, root, t, count);
            if (!MerkleProofLib.verify(proofs[t], root, MerkleProofLib.leafHash(leaves[t]), index, count)) {
                revert ChallengeInvalidProof(t, index);
            }
        }
    }

    /// @dev Closes the challenge as ProviderFaulted: slashes the provider (once per PoG root),
    /// returns the bond to the challenger and refunds a job's renter.
    function _faultProvider(uint256 challengeId, Challenge storage c, address rewardRecipient) internal {
        bool pogKind = c.kind == Kind.Pog;
        if (pogKind && !_markRootFaulted(c)) {
            _dismiss(challengeId, c);
            return;
        }
        c.status = Status.ProviderFaulted;
        emit ChallengeClosed(challengeId, Status.ProviderFaulted);
        _credit(challengeId, c.challenger, c.bond);
        if (!pogKind) _releaseJob(c, true);
        emit OffenderSlashed(challengeId, c.provider, staking.slash(c.provider, slashAmount, rewardRecipient));
    }

    function _dismiss(uint256 challengeId, Challenge storage c) internal {
        c.status = Status.Dismissed;
        emit ChallengeClosed(challengeId, Status.Dismissed);
        _credit(challengeId, c.challenger, c.bond);
        if (c.kind == Kind.Job) _releaseJob(c, false);
    }

    function _payBondToProvider(uint256 challengeId, Challenge storage c) internal {
        uint256 fee = c.bond * feeBps / BPS;
        _credit(challengeId, c.provider, c.bond - fee);
        _credit(challengeId, treasury, fee);
    }

    function _credit(uint256 challengeId, address account, uint256 amount) private {
        if (amount == 0) return;
        _owed[account] += amount;
        emit Credited(challengeId, account, amount);
    }

    function _requireStakedVerifier(address account) internal view {
        uint256 stake = staking.stakeOf(account);
        if (stake < minVerifierStake || stake == 0) revert ChallengeNotStakedVerifier(account, stake, minVerifierStake);
    }

    function _existing(uint256 challengeId) internal view returns (Challenge storage c) {
        c = _challenges[challengeId];
        if (c.status == Status.None) revert ChallengeUnknown(challengeId);
    }

    /// @dev PullBalances: an ETH-only ledger.
    function _debitAll(address, address account) internal override returns (uint256 amount) {
        amount = _owed[account];
        if (amount == 0) return 0;
        _owed[account] = 0;
        emit Withdrawn(account, amount);
    }

    function _revertTransferFailed(address to, uint256 amount) internal pure override {
        revert ChallengeTransferFailed(to, amount);
    }
}
