// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Randomness from the hash of a recorded block
/// @notice A request or challenge records the block b it was mined in; its randomness is
/// blockhash(b), which its sender (short of b's proposer) does not know when sending, and which
/// any later transaction can read, so no party has to wait for a block that only another
/// transaction would create. The EVM only serves the hashes of the last 256 blocks, so the value
/// must be read (and stored) within that horizon; callers decide what happens after it.
library BlockRandomness {
    /// @notice Number of past blocks whose hash the EVM serves.
    uint256 internal constant HORIZON = 256;

    /// @notice blockhash(targetBlock) cannot be read yet: the current block is not past it.
    error BlockRandomnessNotYetAvailable(uint256 targetBlock, uint256 currentBlock);
    /// @notice blockhash(targetBlock) is older than 256 blocks and no longer readable.
    error BlockRandomnessExpired(uint256 targetBlock, uint256 currentBlock);

    /// @notice blockhash(targetBlock); reverts while that block is the current one or in the
    /// future, and once it is more than 256 blocks old.
    function hashAt(uint256 targetBlock) internal view returns (bytes32) {
        if (block.number <= targetBlock) revert BlockRandomnessNotYetAvailable(targetBlock, block.number);
        if (block.number - targetBlock > HORIZON) revert BlockRandomnessExpired(targetBlock, block.number);
        return blockhash(targetBlock);
    }

    /// @notice blockhash(recordedBlock + 1), with hashAt's bounds.
    function hashAfter(uint256 recordedBlock) internal view returns (bytes32) {
        return hashAt(recordedBlock + 1);
    }

    /// @notice True once blockhash(targetBlock) can no longer be read.
    function isExpired(uint256 targetBlock) internal view returns (bool) {
        return block.number > targetBlock + HORIZON;
    }
}
