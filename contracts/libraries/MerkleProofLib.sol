// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Position-binding Merkle inclusion proofs (RFC 9162, pymerkle 7 layout, keccak256)
/// @notice leaf hash = keccak256(0x00 || data), node hash = keccak256(0x01 || left || right).
/// The left/right direction of every step is rebuilt from (index, size) as RFC 9162 §2.1.3.2
/// prescribes, so a proof binds its leaf to one index; leaves and nodes carry different prefixes,
/// so an internal node cannot pass as a leaf. Proofs are at most MAX_DEPTH siblings long.
library MerkleProofLib {
    /// @notice Longest proof accepted (trees of up to 2^32 leaves).
    uint256 internal constant MAX_DEPTH = 32;

    /// @notice keccak256(0x00 || data) for leaf data held in calldata.
    function leafHash(bytes calldata data) internal pure returns (bytes32 h) {
        assembly ("memory-safe") {
            let p := mload(0x40)
            mstore8(p, 0x00)
            calldatacopy(add(p, 1), data.offset, data.length)
            h := keccak256(p, add(data.length, 1))
        }
    }

    /// @notice keccak256(0x00 || data) for leaf data held in memory.
    function leafHashMemory(bytes memory data) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked(bytes1(0x00), data));
    }

    /// @notice keccak256(0x01 || left || right).
    function nodeHash(bytes32 left, bytes32 right) internal pure returns (bytes32 h) {
        assembly ("memory-safe") {
            let p := mload(0x40)
            mstore8(p, 0x01)
            mstore(add(p, 1), left)
            mstore(add(p, 33), right)
            h := keccak256(p, 65)
        }
    }

    /// @notice True when `proof` (sibling hashes, bottom-up) shows that the leaf whose hash is
    /// `leaf` sits at 0-based `index` of a tree of `size` leaves with root `root`. False for an
    /// index outside the tree, a proof of the wrong length for (index, size), or a proof longer
    /// than MAX_DEPTH.
    function verify(bytes32[] calldata proof, bytes32 root, bytes32 leaf, uint256 index, uint256 size)
        internal
        pure
        returns (bool)
    {
        if (index >= size || proof.length > MAX_DEPTH) return false;
        uint256 fn = index;
        uint256 sn = size - 1;
        bytes32 r = leaf;
        uint256 len = proof.length;
        for (uint256 i; i < len; ++i) {
            if (sn == 0) return false;
            bytes32 p = proof[i];
            if (fn & 1 == 1 || fn == sn) {
                r = nodeHash(p, r);
                // A right-edge node without a right sibling climbs levels until it is a right child.
                while (fn & 1 == 0 && fn != 0) {
                    fn >>= 1;
                    sn >>= 1;
                }
            } else {
                r = nodeHash(r, p);
            }
            fn >>= 1;
            sn >>= 1;
        }
        return sn == 0 && r == root;
    }
}
