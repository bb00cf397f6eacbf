// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {Deployment} from "./Deployment.sol";
import {MarketHandler} from "./handlers/MarketHandler.sol";
import {IChallengeManager} from "../../contracts/interfaces/IChallengeManager.sol";
import {IJobEscrow} from "../../contracts/interfaces/IJobEscrow.sol";
import {ILeaseManager} from "../../contracts/interfaces/ILeaseManager.sol";

/// @notice The contract set, deployed as `unchained deploy` does, with MarketHandler's parties,
/// and what must hold after any sequence of their actions (issue 32, "honest parties never lose"):
/// - no wei stuck and every contract solvent: each contract's ETH balance equals, exactly, what
///   its own accounting says it holds and owes;
/// - the honest provider is never slashed, is paid every job it committed (never refunded away
///   from it) and every bond of a challenge it won;
/// - the honest renter never pays for a wrong or unopenable result, and gets back the price of
///   every job that did not pay its provider;
/// - honest verifiers keep their stake and every bond they posted;
/// - no honest party was ever refused an action its duty needed (MarketHandler.failure).
abstract contract MarketChecks {
    uint256 internal constant BPS = 10_000;
    address internal constant TREASURY = address(0x7EA5);

    Deployment internal d;
    MarketHandler internal h;

    function setUp() public {
        d = new Deployment(TREASURY);
        h = new MarketHandler(d);
    }

    /// Every property; reverts with the first that does not hold.
    function checkHonestPartiesNeverLose() public view {
        _checkNoHonestPartyWasRefusedItsDuty();
        _checkStakingHoldsExactlyBondedUnbondingAndOwed();
        _checkEscrowHoldsExactlyOpenJobsAndOwed();
        _checkChallengesHoldExactlyOpenBondsAndOwed();
        _checkLeasesHoldExactlyActiveLeasesAndOwed();
        _checkContractsWithoutMoneyHoldNone();
        _checkHonestProviderNeverLoses();
        _checkHonestRenterNeverPaysForAWrongResult();
        _checkHonestVerifiersKeepStakeAndBonds();
    }

    function _checkNoHonestPartyWasRefusedItsDuty() internal view {
        require(bytes(h.failure()).length == 0, h.failure());
    }

    function _checkStakingHoldsExactlyBondedUnbondingAndOwed() internal view {
        uint256 held;
        uint256 owed;
        address[] memory accounts = h.accounts();
        for (uint256 i; i < accounts.length; ++i) {
            (uint256 unbonding,) = d.staking().unbondingOf(accounts[i]);
            held += d.staking().stakeOf(accounts[i]) + unbonding;
            owed += d.staking().owedTo(accounts[i]);
        }
        uint256 totals = d.staking().totalBonded() + d.staking().totalUnbonding();
        require(held == totals, "Staking: bonded + unbonding differ from its totals");
        require(owed == d.staking().totalOwed(), "Staking: pull balances differ from totalOwed");
        require(address(d.staking()).balance == totals + owed, "Staking: balance differs from what it holds and owes");
    }

    function _checkEscrowHoldsExactlyOpenJobsAndOwed() internal view {
        uint256 open;
        for (uint256 i; i < h.jobCount(); ++i) {
            IJobEscrow.Job memory j = h.job(i);
            IJobEscrow.JobStatus status = d.escrow().jobState(j.id).status;
            if (status == IJobEscrow.JobStatus.Funded || status == IJobEscrow.JobStatus.Committed) open += j.price;
        }
        uint256 owed;
        address[] memory accounts = h.accounts();
        for (uint256 i; i < accounts.length; ++i) owed += d.escrow().owedTo(address(0), accounts[i]);
        require(address(d.escrow()).balance == open + owed, "JobEscrow: balance differs from open jobs + owed");
    }

    function _checkChallengesHoldExactlyOpenBondsAndOwed() internal view {
        uint256 open;
        for (uint256 id = 1; id <= d.challenges().challengeCount(); ++id) {
            IChallengeManager.Challenge memory c = d.challenges().challenge(id);
            if (
                c.status == IChallengeManager.Status.Open || c.status == IChallengeManager.Status.Answered
                    || c.status == IChallengeManager.Status.Escalated
            ) open += c.bond;
        }
        uint256 owed;
        address[] memory accounts = h.accounts();
        for (uint256 i; i < accounts.length; ++i) owed += d.challenges().owedTo(accounts[i]);
        require(address(d.challenges()).balance == open + owed, "ChallengeManager: balance differs from open bonds + owed");
    }

    function _checkLeasesHoldExactlyActiveLeasesAndOwed() internal view {
        uint256 open;
        for (uint256 id = 1; id <= d.leases().leaseCount(); ++id) {
            ILeaseManager.Lease memory lease = d.leases().getLease(id);
            if (lease.status == ILeaseManager.LeaseStatus.Active) open += lease.paid;
        }
        uint256 owed;
        address[] memory accounts = h.accounts();
        for (uint256 i; i < accounts.length; ++i) owed += d.leases().owedTo(accounts[i]);
        require(address(d.leases()).balance == open + owed, "LeaseManager: balance differs from active leases + owed");
    }

    function _checkContractsWithoutMoneyHoldNone() internal view {
        require(address(d.pog()).balance == 0, "ProofOfGpu holds wei");
        require(address(d.registry()).balance == 0, "ProviderRegistry holds wei");
        require(address(d.committee()).balance == 0, "DisputeCommittee holds wei");
    }

    function _checkHonestProviderNeverLoses() internal view {
        address p0 = h.P0();
        (uint256 unbonding,) = d.staking().unbondingOf(p0);
        require(
            d.staking().stakeOf(p0) + unbonding + h.unbondWithdrawn(p0) == h.staked(p0),
            "honest provider lost stake"
        );
        uint256 earned;
        for (uint256 i; i < h.jobCount(); ++i) {
            IJobEscrow.Job memory j = h.job(i);
            if (j.provider != p0) continue;
            IJobEscrow.JobStatus status = d.escrow().jobState(j.id).status;
            if (j.itemCount != 0) require(status != IJobEscrow.JobStatus.Refunded, "honest provider's committed job refunded");
            if (status == IJobEscrow.JobStatus.Finalized) earned += j.price - j.price * d.PROTOCOL_FEE_BPS() / BPS;
        }
        require(
            d.escrow().owedTo(address(0), p0) + h.escrowWithdrawn(p0) == earned,
            "honest provider not paid exactly its finalized jobs"
        );
        uint256 bonds;
        for (uint256 id = 1; id <= d.challenges().challengeCount(); ++id) {
            IChallengeManager.Challenge memory c = d.challenges().challenge(id);
            if (c.provider != p0) continue;
            require(c.status != IChallengeManager.Status.ProviderFaulted, "honest provider found at fault");
            if (c.status == IChallengeManager.Status.Settled || c.status == IChallengeManager.Status.ChallengerFaulted) {
                bonds += c.bond - c.bond * d.PROTOCOL_FEE_BPS() / BPS;
            }
        }
        require(
            d.challenges().owedTo(p0) + h.challengeWithdrawn(p0) == bonds,
            "honest provider not paid exactly the bonds of the challenges it won"
        );
    }

    function _checkHonestRenterNeverPaysForAWrongResult() internal view {
        address r0 = h.R0();
        uint256 refunded;
        for (uint256 i; i < h.jobCount(); ++i) {
            IJobEscrow.Job memory j = h.job(i);
            if (j.renter != r0) continue;
            IJobEscrow.JobStatus status = d.escrow().jobState(j.id).status;
            if (status == IJobEscrow.JobStatus.Finalized) {
                require(!h.resultBad(j.id), "honest renter paid for a wrong result");
            }
            if (status == IJobEscrow.JobStatus.Refunded) refunded += j.price;
        }
        require(
            d.escrow().owedTo(address(0), r0) + h.escrowWithdrawn(r0) == refunded,
            "honest renter not refunded exactly its refunded jobs"
        );
    }

    function _checkHonestVerifiersKeepStakeAndBonds() internal view {
        require(d.staking().stakeOf(h.V0()) == h.staked(h.V0()), "honest verifier lost stake");
        require(d.staking().stakeOf(h.V1()) == h.staked(h.V1()), "honest voter lost stake");
        _checkBondsOf(h.R0());
        _checkBondsOf(h.V0());
    }

    /// An honest challenger's bond comes back whole: its challenges end with the provider at
    /// fault, or dismissed; never settled to the provider or found wrong.
    function _checkBondsOf(address challenger) internal view {
        uint256 returned;
        uint256 open;
        for (uint256 id = 1; id <= d.challenges().challengeCount(); ++id) {
            IChallengeManager.Challenge memory c = d.challenges().challenge(id);
            if (c.challenger != challenger) continue;
            require(
                c.status != IChallengeManager.Status.Settled && c.status != IChallengeManager.Status.ChallengerFaulted,
                "honest challenger lost its bond"
            );
            if (c.status == IChallengeManager.Status.ProviderFaulted || c.status == IChallengeManager.Status.Dismissed) {
                returned += c.bond;
            } else {
                open += c.bond;
            }
        }
        require(returned + open == h.bondsPosted(challenger), "honest challenger's bonds not all accounted");
        require(
            d.challenges().owedTo(challenger) + h.challengeWithdrawn(challenger) == returned,
            "honest challenger not repaid exactly its returned bonds"
        );
    }
}
