// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

/// @notice The few forge cheatcodes these tests use (forge-std's npm build lacks its ds-test
/// dependency, so the tests carry their own interface to the cheatcode address).
interface Vm {
    function warp(uint256 timestamp) external;
    function roll(uint256 blockNumber) external;
    function deal(address account, uint256 balance) external;
    function prank(address sender) external;
    function addr(uint256 privateKey) external pure returns (address);
    function sign(uint256 privateKey, bytes32 digest) external pure returns (uint8 v, bytes32 r, bytes32 s);
    function label(address account, string calldata name) external;
}

abstract contract Cheats {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    /// @dev x mapped into [lo, hi] (the fuzzer's raw inputs are spread over the whole range).
    function _bound(uint256 x, uint256 lo, uint256 hi) internal pure returns (uint256) {
        return lo + x % (hi - lo + 1);
    }
}
