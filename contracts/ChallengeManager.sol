// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {IChallengeManager} from "./interfaces/IChallengeManager.sol";
import {IDisputeCommittee, IDisputeResolver} from "./interfaces/IDisputeCommittee.sol";
import {IProofOfGpu} from "./interfaces/IProofOfGpu.sol";
import {IJobEscrow} from "./interfaces/IJobEscrow.sol";
import {IStaking} from "./interfaces/IStaking.sol";
import {MerkleProofLib} from "./libraries/MerkleProofLib.sol";
import {PogMath} from "./libraries/PogMath.sol";

/// @title Challenges of PoG roots and job output roots, fraud proofs, timeouts and settlement
/// @notice Holds challengers' bonds and pays them out as pull balances. Wiring: grant this
/// contract SLASHER_ROLE on Staking, DISPUTE_ROLE on JobEscrow and OPENER_ROLE on the
/// DisputeCommittee. Parameters are fixed at deployment (see Config).
/// @dev Decisions where the design is silent:
/// - A PoG root is slashed at most once: after a fault, further challenges of that root are
///   refused and ones already open end Dismissed (bond returned, nobody slashed).
/// - Any chunk under the challenged root may be proven fraudulent, not only the challenged ones:
///   a committed root with one wrong element is false wherever the element lies.
/// - The fraud prover receives the slash reward (it did the work); the challenger gets its bond.
/// - R = keccak256(blockhash(anchorBlock - 1), challengeId), stored when the challenge opens
///   (anchorBlock is the opening block). It never changes and never expires, so nobody, the
///   challenged provider included, can draw again by waiting: the provider learns one set of
///   indices and answers it or is slashed. Only the challenger knew R when sending; choosing it
///   helps no honest party (an honest root answers every index), and the root was committed
///   before that block existed.
/// - A fraud proof is accepted while the challenge is open as well as answered, so that a wrong
///   chunk the verifier already holds (revealed off-chain behind a valid inclusion proof) settles
///   the challenge at once, whatever indices it drew.
contract ChallengeManager is IChallengeManager {
    uint256 private constant MAX_K = 64;
    uint256 private constant MIN_POG_K = 32;
    uint256 private constant JOB_LEAF_BYTES = 32;
    uint256 private constant BPS = 10_000;
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

    mapping(uint256 challengeId => Challenge) private _challenges;
    mapping(address account => uint256) private _owed;
    /// @dev keccak256(roundId, gpuIndex) of PoG roots already slashed for.
    mapping(bytes32 rootKey => bool) private _rootFaulted;
    /// @inheritdoc IChallengeManager
    mapping(uint256 jobId => uint256 challengeId) public activeJobChallenge;

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
    function challengePog(uint256 roundId, uint256 gpuIndex, uint256 k)
        external
        payable
        returns (uint256 challengeId)
    {
        if (k < MIN_POG_K || k > MAX_K) revert ChallengeBadK(k);
        _requireStakedVerifier(msg.sender);
        IProofOfGpu.Round memory r = pog.round(roundId);
        if (r.committedAt == 0 || block.timestamp > uint256(r.committedAt) + pog.rootChallengePeriod()) {
            revert ChallengeRoundNotChallengeable(roundId);
        }
        if (r.provider == msg.sender) revert ChallengeSelfChallenge(msg.sender);
        if (_rootFaulted[_rootKey(roundId, gpuIndex)]) revert ChallengeRootFaulted(roundId, gpuIndex);
        bytes32 root = pog.rootOf(roundId, gpuIndex); // reverts for a GPU index outside the round
        challengeId = _open(Kind.Pog, r.provider, roundId, gpuIndex, root, PogMath.leafCount(r.n), k);
        emit PogChallenged(
            challengeId, roundId, gpuIndex, msg.sender, r.provider, k, msg.value, block.timestamp + responseWindow
        );
        emit ChallengeRandomnessFixed(challengeId, _challenges[challengeId].randomness);
    }

    /// @inheritdoc IChallengeManager
    function challengeJob(IJobEscrow.Job calldata job, uint256 k) external payable returns (uint256 challengeId) {
        if (k == 0 || k > MAX_K) revert ChallengeBadK(k);
        uint256 jobId = job.id;
        // The job's fields are the escrow's: freeze below reverts unless they hash to its slot.
        IJobEscrow.JobState memory state = escrow.jobState(jobId);
        if (msg.sender != job.renter) _requireStakedVerifier(msg.sender);
        if (msg.sender == job.provider) revert ChallengeSelfChallenge(msg.sender);
        if (
            state.status != IJobEscrow.JobStatus.Committed || block.timestamp >= state.endsAt
                || job.itemCount == 0
        ) revert ChallengeJobNotChallengeable(jobId);
        uint256 active = activeJobChallenge[jobId];
        if (active != 0) revert ChallengeJobAlreadyChallenged(jobId, active);
        challengeId = _open(Kind.Job, job.provider, jobId, 0, job.outputRoot, job.itemCount, k);
        activeJobChallenge[jobId] = challengeId;
        emit JobChallenged(
            challengeId, jobId, msg.sender, job.provider, k, msg.value, block.timestamp + responseWindow
        );
        emit ChallengeRandomnessFixed(challengeId, _challenges[challengeId].randomness);
        escrow.freeze(job);
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
    function proveFraud(
        uint256 challengeId,
        uint256 chunkIndex,
        bytes calldata chunkData,
        bytes32[] calldata proof,
        uint256 elementOffset
    ) external {
        Challenge storage c = _existing(challengeId);
        if (c.kind != Kind.Pog) revert ChallengeWrongKind(challengeId, c.kind);
        if (c.status == Status.Answered) {
            uint256 windowEnd = uint256(c.answeredAt) + fraudWindow;
            if (block.timestamp > windowEnd) revert ChallengeWindowClosed(challengeId, windowEnd);
        } else if (c.status != Status.Open) {
            revert ChallengeWrongStatus(challengeId, c.status);
        }
        if (chunkIndex >= c.leafCount) revert ChallengeChunkOutOfRange(chunkIndex, c.leafCount);
        int256 claimed = PogMath.chunkElement(chunkData, elementOffset); // checks length and offset
        if (!MerkleProofLib.verify(proof, c.root, MerkleProofLib.leafHash(chunkData), chunkIndex, c.leafCount)) {
            revert ChallengeInvalidProof(0, chunkIndex);
        }
        int256 expected = _expectedElement(c.subject, c.gpuIndex, chunkIndex, elementOffset);
        if (expected == claimed) revert ChallengeNoFraud(chunkIndex, elementOffset, claimed);
        emit FraudProven(challengeId, msg.sender, chunkIndex, elementOffset, expected, claimed);
        _faultProvider(challengeId, c, msg.sender);
    }

    /// @inheritdoc IChallengeManager
    function settle(uint256 challengeId) external {
        Challenge storage c = _existing(challengeId);
        if (c.status != Status.Answered) revert ChallengeWrongStatus(challengeId, c.status);
        uint256 windowEnd = uint256(c.answeredAt) + (c.kind == Kind.Pog ? fraudWindow : escalationWindow);
        if (block.timestamp <= windowEnd) revert ChallengeWindowOpen(challengeId, windowEnd);
        c.status = Status.Settled;
        emit ChallengeClosed(challengeId, Status.Settled);
        _payBondToProvider(challengeId, c);
        _releaseJob(c, false);
    }

    /// @inheritdoc IChallengeManager
    function escalate(uint256 challengeId) external returns (uint256 disputeId) {
        Challenge storage c = _existing(challengeId);
        if (c.kind != Kind.Job) revert ChallengeWrongKind(challengeId, c.kind);
        if (msg.sender != c.challenger) revert ChallengeNotChallenger(challengeId, msg.sender);
        if (c.status != Status.Answered) revert ChallengeWrongStatus(challengeId, c.status);
        uint256 windowEnd = uint256(c.answeredAt) + escalationWindow;
        if (block.timestamp > windowEnd) revert ChallengeWindowClosed(challengeId, windowEnd);
        c.status = Status.Escalated;
        disputeId = committee.open(challengeId, c.challenger, c.provider);
        c.disputeId = disputeId;
        emit ChallengeEscalated(challengeId, disputeId);
    }

    /// @inheritdoc IDisputeResolver
    /// @dev Only the committee, for an escalated challenge. ProviderAtFault: provider slashed, renter refunded, bond returned. ChallengerWrong: bond
    /// (minus fee) to the provider, challenger slashed by falseClaimSlash, escrow unfrozen.
    /// NoFault: bond returned, nobody slashed, escrow unfrozen.
    function onDisputeResolved(uint256 challengeId, IDisputeCommittee.Verdict verdict) external {
        if (msg.sender != address(committee)) revert ChallengeNotCommittee(msg.sender);
        Challenge storage c = _existing(challengeId);
        if (c.status != Status.Escalated) revert ChallengeWrongStatus(challengeId, c.status);
        emit ChallengeDisputeResolved(challengeId, uint8(verdict));
        if (verdict == IDisputeCommittee.Verdict.ProviderAtFault) {
            _faultProvider(challengeId, c, c.challenger);
        } else if (verdict == IDisputeCommittee.Verdict.ChallengerWrong) {
            c.status = Status.ChallengerFaulted;
            emit ChallengeClosed(challengeId, Status.ChallengerFaulted);
            _payBondToProvider(challengeId, c);
            _releaseJob(c, false);
            emit OffenderSlashed(challengeId, c.challenger, staking.slash(c.challenger, falseClaimSlash, c.provider));
        } else {
            _dismiss(challengeId, c);
        }
    }

    /// @inheritdoc IChallengeManager
    function withdraw() external {
        uint256 amount = _owed[msg.sender];
        if (amount == 0) revert ChallengeNothingOwed(msg.sender);
        _owed[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        (bool ok,) = msg.sender.call{value: amount}("");
        if (!ok) revert ChallengeTransferFailed(msg.sender, amount);
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

    function _open(
        Kind kind,
        address provider,
        uint256 subject,
        uint256 gpuIndex,
        bytes32 root,
        uint256 count,
        uint256 k
    ) private returns (uint256 challengeId) {
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

    /// @dev Element `offset` of chunk `chunkIndex` of C for GPU `gpuIndex` in round `roundId`.
    function _expectedElement(uint256 roundId, uint256 gpuIndex, uint256 chunkIndex, uint256 offset)
        private
        view
        returns (int256)
    {
        uint256 n = pog.round(roundId).n;
        (uint256 row, uint256 col) = PogMath.chunkPosition(chunkIndex, offset, n);
        return PogMath.element(pog.gpuSeedOf(roundId, gpuIndex), n, row, col);
    }

    /// @dev Closes the challenge as ProviderFaulted: slashes the provider (once per PoG root),
    /// returns the bond to the challenger and refunds a job's renter.
    function _faultProvider(uint256 challengeId, Challenge storage c, address rewardRecipient) private {
        if (c.kind == Kind.Pog) {
            bytes32 key = _rootKey(c.subject, c.gpuIndex);
            if (_rootFaulted[key]) {
                _dismiss(challengeId, c);
                return;
            }
            _rootFaulted[key] = true;
        }
        c.status = Status.ProviderFaulted;
        emit ChallengeClosed(challengeId, Status.ProviderFaulted);
        _credit(challengeId, c.challenger, c.bond);
        _releaseJob(c, true);
        emit OffenderSlashed(challengeId, c.provider, staking.slash(c.provider, slashAmount, rewardRecipient));
    }

    function _dismiss(uint256 challengeId, Challenge storage c) private {
        c.status = Status.Dismissed;
        emit ChallengeClosed(challengeId, Status.Dismissed);
        _credit(challengeId, c.challenger, c.bond);
        _releaseJob(c, false);
    }

    function _payBondToProvider(uint256 challengeId, Challenge storage c) private {
        uint256 fee = c.bond * feeBps / BPS;
        _credit(challengeId, c.provider, c.bond - fee);
        _credit(challengeId, treasury, fee);
    }

    function _releaseJob(Challenge storage c, bool providerAtFault) private {
        if (c.kind != Kind.Job) return;
        delete activeJobChallenge[c.subject];
        escrow.resolveFreeze(c.subject, providerAtFault);
    }

    function _credit(uint256 challengeId, address account, uint256 amount) private {
        if (amount == 0) return;
        _owed[account] += amount;
        emit Credited(challengeId, account, amount);
    }

    function _requireStakedVerifier(address account) private view {
        uint256 stake = staking.stakeOf(account);
        if (stake < minVerifierStake || stake == 0) revert ChallengeNotStakedVerifier(account, stake, minVerifierStake);
    }

    function _existing(uint256 challengeId) private view returns (Challenge storage c) {
        c = _challenges[challengeId];
        if (c.status == Status.None) revert ChallengeUnknown(challengeId);
    }

    function _rootKey(uint256 roundId, uint256 gpuIndex) private pure returns (bytes32) {
        return keccak256(abi.encode(roundId, gpuIndex));
    }
}
