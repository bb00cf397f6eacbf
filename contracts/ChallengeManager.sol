// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {ChallengeCore} from "./challenges/ChallengeCore.sol";
import {JobChallenges} from "./challenges/JobChallenges.sol";
import {PogChallenges} from "./challenges/PogChallenges.sol";

/// @title Challenges of PoG roots and job output roots, fraud proofs, timeouts and settlement
/// @notice Holds challengers' bonds and pays them out as pull balances. Wiring: grant this
/// contract SLASHER_ROLE on Staking, DISPUTE_ROLE on JobEscrow and OPENER_ROLE on the
/// DisputeCommittee. Parameters are fixed at deployment (see Config).
/// @dev Built from its parts, one deployed contract: ChallengeCore (parameters, bonds, answers,
/// timeouts, settlement, pull balances), PogChallenges (PoG roots, fraud proofs, one slash per
/// root) and JobChallenges (job output roots, escrow freezes, committee escalation). The design
/// decisions each part takes are written on it.
contract ChallengeManager is PogChallenges, JobChallenges {
    /// @param config addresses and parameters; see IChallengeManager.Config for each field
    constructor(Config memory config) ChallengeCore(config) {}
}
