// Inclusion check of one result item against an output root, in protocol/merkle.py's format:
// RFC 9162 layout, keccak-256, leaf = keccak(0x00 || keccak(output bytes)),
// node = keccak(0x01 || left || right); directions rebuilt from (index, size), never trusted.
"use strict";
const merkle = (() => {
  const MAX_PROOF_DEPTH = 32;
  const hexToBytes = (hex) => {
    const clean = hex.startsWith("0x") ? hex.slice(2) : hex;
    if (!/^([0-9a-fA-F]{2})*$/.test(clean)) throw new Error(`not hex: ${hex}`);
    return Uint8Array.from(clean.match(/../g) || [], (b) => parseInt(b, 16));
  };
  const bytesToHex = (bytes) => "0x" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  const prefixed = (prefix, ...parts) => {
    const out = new Uint8Array(1 + parts.reduce((n, p) => n + p.length, 0));
    out[0] = prefix;
    let at = 1;
    for (const p of parts) { out.set(p, at); at += p.length; }
    return keccak256(out);
  };
  const leafHash = (data) => prefixed(0x00, data);
  const nodeHash = (left, right) => prefixed(0x01, left, right);

  // Port of protocol.merkle.root_from_proof (throws where it raises InvalidProof).
  function rootFromProof(leaf, index, size, siblings) {
    if (!(index >= 0 && index < size)) throw new Error(`index ${index} outside a tree of ${size}`);
    if (siblings.length > MAX_PROOF_DEPTH) throw new Error(`proof depth ${siblings.length} exceeds ${MAX_PROOF_DEPTH}`);
    let fn = index, sn = size - 1, result = leaf;
    for (const sibling of siblings) {
      if (sibling.length !== 32) throw new Error("sibling is not 32 bytes");
      if (sn === 0) throw new Error("proof longer than the tree is deep");
      if (fn % 2 === 1 || fn === sn) {
        result = nodeHash(sibling, result);
        if (fn % 2 === 0) { while (fn && fn % 2 === 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); } }
      } else {
        result = nodeHash(result, sibling);
      }
      fn = Math.floor(fn / 2); sn = Math.floor(sn / 2);
    }
    if (sn !== 0) throw new Error("proof shorter than the tree is deep");
    return result;
  }

  // Checks downloaded output bytes against the root; resolves to their digest, throws why not.
  function verifyItem(bytes, index, size, proofHex, rootHex) {
    const digest = keccak256(bytes);
    const root = rootFromProof(leafHash(digest), index, size, proofHex.map(hexToBytes));
    if (bytesToHex(root) !== rootHex.toLowerCase()) throw new Error("the bytes and proof do not rebuild the on-chain root");
    return bytesToHex(digest);
  }

  return { hexToBytes, bytesToHex, leafHash, nodeHash, rootFromProof, verifyItem };
})();
