// Ethereum's keccak-256 (the original Keccak padding, not NIST SHA3's) for the page's scripts,
// from @noble/hashes: its ES modules are vendored in ./noble-hashes/ (version and licence in the
// README there), so the page needs no build step and no node_modules where the backend runs.
import { keccak_256 } from "/static/noble-hashes/sha3.js";

// keccak256(bytes: Uint8Array) -> Uint8Array(32), a global for the classic scripts after this one
globalThis.keccak256 = (bytes) => keccak_256(bytes);
