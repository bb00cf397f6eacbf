// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {IOneTimeWiring} from "../interfaces/IOneTimeWiring.sol";

/// @title OneTimeWiring
/// @notice AccessControl whose roles are granted once by the deployer and never again; see
/// IOneTimeWiring. DEFAULT_ADMIN_ROLE, the admin of every role, is never granted, so
/// grantRole and revokeRole revert for every caller, the deployer included.
abstract contract OneTimeWiring is IOneTimeWiring, AccessControl {
    /// @notice Most holders one role can be given (the wiring loops over them).
    uint256 public constant MAX_ROLE_HOLDERS = 4;

    address private immutable _deployer;
    /// @inheritdoc IOneTimeWiring
    bool public wired;

    constructor() {
        _deployer = msg.sender;
    }

    /// @dev Runs the body once, for the deployer only; marks the contract wired first.
    modifier wiring() {
        if (msg.sender != _deployer) revert WiringNotDeployer(msg.sender);
        if (wired) revert WiringAlreadyDone();
        wired = true;
        _;
        emit Wired(msg.sender);
    }

    function _grantAll(bytes32 role, address[] calldata holders) internal {
        uint256 count = holders.length;
        if (count > MAX_ROLE_HOLDERS) revert WiringTooManyHolders(count, MAX_ROLE_HOLDERS);
        for (uint256 i; i < count; ++i) {
            if (holders[i] == address(0)) revert WiringZeroAddress();
            _grantRole(role, holders[i]);
        }
    }
}
