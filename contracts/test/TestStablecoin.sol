// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title TestStablecoin
/// @notice A plain 6-decimal ERC-20 anyone can mint: for tests and the local demo only.
contract TestStablecoin is ERC20 {
    constructor() ERC20("Unchained Test USD", "tUSD") {}

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    /// @notice Mints `amount` to `to`; deliberately unrestricted (test token).
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
