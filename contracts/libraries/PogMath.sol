// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Proof-of-GPU workload arithmetic (docs/PROTOCOL.md, "Proof of GPU workload (v1)")
/// @notice Recomputes single elements of C = A·B from a GPU's seed so that a fraud claim about
/// one committed chunk can be judged on-chain, derives challenge indices and reads chunk elements.
/// All word arithmetic is unsigned 32-bit with wrap-around.
library PogMath {
    /// @notice Elements per committed chunk (one Merkle leaf).
    uint256 internal constant CHUNK_ELEMENTS = 64;
    /// @notice Bytes per committed chunk: 64 big-endian int32.
    uint256 internal constant CHUNK_BYTES = 256;
    uint256 internal constant MIN_N = 64;
    uint256 internal constant MAX_N = 65536;

    /// @dev 1 in every 64-bit lane.
    uint256 private constant LANE_ONES = 0x0000000000000001000000000000000100000000000000010000000000000001;
    /// @dev The low 32 bits of every lane.
    uint256 private constant LANE_MASK32 = 0x00000000ffffffff00000000ffffffff00000000ffffffff00000000ffffffff;
    /// @dev 4 in every lane: the next four word counters.
    uint256 private constant LANE_STEP = 0x0000000000000004000000000000000400000000000000040000000000000004;
    /// @dev The low nibble of every lane.
    uint256 private constant LANE_NIBBLE = 0x000000000000000f000000000000000f000000000000000f000000000000000f;
    /// @dev The low nibble of every byte of every word.
    uint256 private constant LANE_LOW_NIBBLES = 0x000000000f0f0f0f000000000f0f0f0f000000000f0f0f0f000000000f0f0f0f;
    /// @dev The low byte of every 16-bit lane.
    uint256 private constant LOW_BYTES16 = 0x00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff;
    /// @dev 1 in every 16-bit lane.
    uint256 private constant ONES16 = 0x0001000100010001000100010001000100010001000100010001000100010001;

    error PogMathBadN(uint256 n);
    error PogMathIndexOutOfRange(uint256 i, uint256 j, uint256 n);
    error PogMathBadChunkLength(uint256 length);
    error PogMathBadElementOffset(uint256 offset);

    /// @notice True when n is a multiple of 64 in [64, 65536].
    function isValidN(uint256 n) internal pure returns (bool) {
        return n >= MIN_N && n <= MAX_N && n % 64 == 0;
    }

    /// @notice gpuSeed = keccak256(abi.encode(roundSeed, g, uuidHash)).
    function gpuSeed(bytes32 roundSeed, uint256 gpuIndex, bytes32 uuidHash) internal pure returns (bytes32) {
        return keccak256(abi.encode(roundSeed, gpuIndex, uuidHash));
    }

    /// @notice The two 32-bit keys of matrix `m` (0 for A, 1 for B): the first and next 4 bytes
    /// of keccak256(abi.encodePacked(gpuSeed, uint8 m)), big-endian.
    function keys(bytes32 seed, uint8 m) internal pure returns (uint32 k1, uint32 k2) {
        bytes32 h = keccak256(abi.encodePacked(seed, m));
        k1 = uint32(uint256(h) >> 224);
        k2 = uint32(uint256(h) >> 192);
    }

    /// @notice mix(mix(w ^ k1) ^ k2), the keyed word generator of one matrix.
    function word(uint32 k1, uint32 k2, uint256 w) internal pure returns (uint32) {
        return mix(mix(uint32(w) ^ k1) ^ k2);
    }

    /// @notice x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16.
    function mix(uint32 x) internal pure returns (uint32) {
        unchecked {
            x ^= x >> 16;
            x *= 0x7feb352d;
            x ^= x >> 15;
            x *= 0x846ca68b;
            return x ^ (x >> 16);
        }
    }

    /// @notice C[i][j] = sum_k A[i][k] * Bt[j][k] for the matrices generated from `seed` at size n.
    /// Costs 2*(n/8) word generations and n multiply-adds (the contract's only O(n) path).
    /// @dev Four words per 256-bit register (one per 64-bit lane, 32 bits of headroom each), so
    /// one mix step and one nibble product serve four word pairs:
    /// - a 32x32-bit product fits its 64-bit lane, so `mul` by a constant is four lane products;
    ///   bits shifted in from the next lane land above bit 32 and are masked off before each mul;
    /// - A's lanes hold words w..w+3 and B's lanes words w+3..w, so for the nibble planes
    ///   a_l and b_l the top lane of mul(a, b) is sum_l a_l*b_l (the x^3 coefficient of the
    ///   product of the two lane polynomials; lower coefficients are < 2^10 and cannot carry).
    function element(bytes32 seed, uint256 n, uint256 i, uint256 j) internal pure returns (int256 c) {
        if (!isValidN(n)) revert PogMathBadN(n);
        if (i >= n || j >= n) revert PogMathIndexOutOfRange(i, j, n);
        (uint32 a1, uint32 a2) = keys(seed, 0);
        (uint32 b1, uint32 b2) = keys(seed, 1);
        uint256 wordsPerRow = n / 8;
        uint256 prod;
        uint256 sum;
        assembly ("memory-safe") {
            // Word counters: A lanes aStart+w+l, B lanes bStart+w+3-l; keys broadcast to every lane
            // (Solidity leaves the bits above a uint32 undefined on the stack: clean them).
            let ia := mul(i, wordsPerRow)
            let ib := add(mul(j, wordsPerRow), 3)
            ia := or(or(ia, shl(64, add(ia, 1))), or(shl(128, add(ia, 2)), shl(192, add(ia, 3))))
            ib := or(or(ib, shl(64, sub(ib, 1))), or(shl(128, sub(ib, 2)), shl(192, sub(ib, 3))))
            let ka1 := mul(LANE_ONES, and(a1, 0xffffffff))
            let ka2 := mul(LANE_ONES, and(a2, 0xffffffff))
            let kb1 := mul(LANE_ONES, and(b1, 0xffffffff))
            let kb2 := mul(LANE_ONES, and(b2, 0xffffffff))
            for { let w := 0 } lt(w, wordsPerRow) { w := add(w, 4) } {
                // wa, wb = mix(mix(counter ^ k1) ^ k2) in every lane
                let wa := xor(ia, ka1)
                wa := xor(wa, shr(16, wa))
                wa := and(mul(and(wa, LANE_MASK32), 0x7feb352d), LANE_MASK32)
                wa := xor(wa, shr(15, wa))
                wa := and(mul(and(wa, LANE_MASK32), 0x846ca68b), LANE_MASK32)
                wa := xor(and(xor(wa, shr(16, wa)), LANE_MASK32), ka2)
                wa := xor(wa, shr(16, wa))
                wa := and(mul(and(wa, LANE_MASK32), 0x7feb352d), LANE_MASK32)
                wa := xor(wa, shr(15, wa))
                wa := and(mul(and(wa, LANE_MASK32), 0x846ca68b), LANE_MASK32)
                wa := and(xor(wa, shr(16, wa)), LANE_MASK32)
                let wb := xor(ib, kb1)
                wb := xor(wb, shr(16, wb))
                wb := and(mul(and(wb, LANE_MASK32), 0x7feb352d), LANE_MASK32)
                wb := xor(wb, shr(15, wb))
                wb := and(mul(and(wb, LANE_MASK32), 0x846ca68b), LANE_MASK32)
                wb := xor(and(xor(wb, shr(16, wb)), LANE_MASK32), kb2)
                wb := xor(wb, shr(16, wb))
                wb := and(mul(and(wb, LANE_MASK32), 0x7feb352d), LANE_MASK32)
                wb := xor(wb, shr(15, wb))
                wb := and(mul(and(wb, LANE_MASK32), 0x846ca68b), LANE_MASK32)
                wb := and(xor(wb, shr(16, wb)), LANE_MASK32)
                // Nibble sums of all eight words: bytes (<= 60), then 16-bit lanes, then total.
                let t := add(
                    add(and(wa, LANE_LOW_NIBBLES), and(shr(4, wa), LANE_LOW_NIBBLES)),
                    add(and(wb, LANE_LOW_NIBBLES), and(shr(4, wb), LANE_LOW_NIBBLES))
                )
                t := add(and(t, LOW_BYTES16), and(shr(8, t), LOW_BYTES16))
                sum := add(sum, shr(240, mul(t, ONES16)))
                // Nibble plane q of the four pairs: one product each.
                prod := add(prod, shr(192, mul(and(wa, LANE_NIBBLE), and(wb, LANE_NIBBLE))))
                prod := add(prod, shr(192, mul(and(shr(4, wa), LANE_NIBBLE), and(shr(4, wb), LANE_NIBBLE))))
                prod := add(prod, shr(192, mul(and(shr(8, wa), LANE_NIBBLE), and(shr(8, wb), LANE_NIBBLE))))
                prod := add(prod, shr(192, mul(and(shr(12, wa), LANE_NIBBLE), and(shr(12, wb), LANE_NIBBLE))))
                prod := add(prod, shr(192, mul(and(shr(16, wa), LANE_NIBBLE), and(shr(16, wb), LANE_NIBBLE))))
                prod := add(prod, shr(192, mul(and(shr(20, wa), LANE_NIBBLE), and(shr(20, wb), LANE_NIBBLE))))
                prod := add(prod, shr(192, mul(and(shr(24, wa), LANE_NIBBLE), and(shr(24, wb), LANE_NIBBLE))))
                prod := add(prod, shr(192, mul(and(shr(28, wa), LANE_NIBBLE), and(shr(28, wb), LANE_NIBBLE))))
                ia := add(ia, LANE_STEP)
                ib := add(ib, LANE_STEP)
            }
        }
        // sum (a-8)(b-8) = sum ab - 8 (sum a + sum b) + 64 n; all terms far below 2^255.
        c = int256(prod) - 8 * int256(sum) + 64 * int256(n);
    }

    /// @notice index_t = uint256(keccak256(abi.encode(randomness, root, t))) mod count, where
    /// count is the number of leaves under `root`.
    function challengeIndex(bytes32 randomness, bytes32 root, uint256 t, uint256 count)
        internal
        pure
        returns (uint256)
    {
        return uint256(keccak256(abi.encode(randomness, root, t))) % count;
    }

    /// @notice Number of chunks (Merkle leaves) committing to an n x n result: n*n/64.
    function leafCount(uint256 n) internal pure returns (uint256) {
        return n * n / CHUNK_ELEMENTS;
    }

    /// @notice Element `offset` (0..63) of a 256-byte chunk: a big-endian two's-complement int32.
    function chunkElement(bytes calldata chunk, uint256 offset) internal pure returns (int256 v) {
        if (chunk.length != CHUNK_BYTES) revert PogMathBadChunkLength(chunk.length);
        if (offset >= CHUNK_ELEMENTS) revert PogMathBadElementOffset(offset);
        v = int256(int32(uint32(bytes4(chunk[offset * 4:offset * 4 + 4]))));
    }

    /// @notice Row and column of element `offset` of chunk `chunkIndex` in C flattened row-major.
    function chunkPosition(uint256 chunkIndex, uint256 offset, uint256 n)
        internal
        pure
        returns (uint256 row, uint256 col)
    {
        uint256 flat = chunkIndex * CHUNK_ELEMENTS + offset;
        row = flat / n;
        col = flat % n;
    }
}
