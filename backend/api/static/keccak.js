// Ethereum's keccak-256 (the original Keccak padding 0x01, not NIST SHA3's 0x06) on 32-bit
// lane halves, so the page can hash results and compute call selectors with no library.
// State: 25 lanes of 64 bits as 50 words, s[2i] the low and s[2i+1] the high half of lane i.
"use strict";
const keccak256 = (() => {
  const RC = [  // round constants as [high, low]
    [0x00000000, 0x00000001], [0x00000000, 0x00008082], [0x80000000, 0x0000808a], [0x80000000, 0x80008000],
    [0x00000000, 0x0000808b], [0x00000000, 0x80000001], [0x80000000, 0x80008081], [0x80000000, 0x00008009],
    [0x00000000, 0x0000008a], [0x00000000, 0x00000088], [0x00000000, 0x80008009], [0x00000000, 0x8000000a],
    [0x00000000, 0x8000808b], [0x80000000, 0x0000008b], [0x80000000, 0x00008089], [0x80000000, 0x00008003],
    [0x80000000, 0x00008002], [0x80000000, 0x00000080], [0x00000000, 0x0000800a], [0x80000000, 0x8000000a],
    [0x80000000, 0x80008081], [0x80000000, 0x00008080], [0x00000000, 0x80000001], [0x80000000, 0x80008008]];
  // rotation of lane x + 5y (rho), and where pi moves it: lane y + 5((2x + 3y) mod 5)
  const ROT = [0, 1, 62, 28, 27, 36, 44, 6, 55, 20, 3, 10, 43, 25, 39, 41, 45, 15, 21, 8, 18, 2, 61, 56, 14];
  const DEST = ROT.map((_, i) => { const x = i % 5, y = (i / 5) | 0; return y + 5 * ((2 * x + 3 * y) % 5); });
  const RATE = 136;

  function permute(s) {
    const c = new Uint32Array(10), b = new Uint32Array(50);
    for (let round = 0; round < 24; round++) {
      for (let x = 0; x < 5; x++) {
        c[2 * x] = s[2 * x] ^ s[2 * x + 10] ^ s[2 * x + 20] ^ s[2 * x + 30] ^ s[2 * x + 40];
        c[2 * x + 1] = s[2 * x + 1] ^ s[2 * x + 11] ^ s[2 * x + 21] ^ s[2 * x + 31] ^ s[2 * x + 41];
      }
      for (let x = 0; x < 5; x++) {  // theta: d = c[x-1] ^ rotl(c[x+1], 1)
        const p = 2 * ((x + 4) % 5), n = 2 * ((x + 1) % 5);
        const lo = c[p] ^ ((c[n] << 1) | (c[n + 1] >>> 31)), hi = c[p + 1] ^ ((c[n + 1] << 1) | (c[n] >>> 31));
        for (let y = 0; y < 50; y += 10) { s[y + 2 * x] ^= lo; s[y + 2 * x + 1] ^= hi; }
      }
      for (let i = 0; i < 25; i++) {  // rho and pi
        let lo = s[2 * i], hi = s[2 * i + 1], r = ROT[i];
        if (r >= 32) { [lo, hi] = [hi, lo]; r -= 32; }
        if (r) { [lo, hi] = [(lo << r) | (hi >>> (32 - r)), (hi << r) | (lo >>> (32 - r))]; }
        b[2 * DEST[i]] = lo; b[2 * DEST[i] + 1] = hi;
      }
      for (let y = 0; y < 25; y += 5) {  // chi
        for (let x = 0; x < 5; x++) {
          const i = y + x, j = y + (x + 1) % 5, k = y + (x + 2) % 5;
          s[2 * i] = b[2 * i] ^ (~b[2 * j] & b[2 * k]);
          s[2 * i + 1] = b[2 * i + 1] ^ (~b[2 * j + 1] & b[2 * k + 1]);
        }
      }
      s[0] ^= RC[round][1]; s[1] ^= RC[round][0];  // iota
    }
  }

  // keccak256(bytes: Uint8Array) -> Uint8Array(32)
  return function keccak256(bytes) {
    const s = new Uint32Array(50);
    const padded = new Uint8Array((Math.floor(bytes.length / RATE) + 1) * RATE);
    padded.set(bytes);
    padded[bytes.length] ^= 0x01;
    padded[padded.length - 1] ^= 0x80;
    for (let off = 0; off < padded.length; off += RATE) {
      for (let k = 0; k < RATE; k++) s[k >> 2] ^= padded[off + k] << ((k & 3) * 8);
      permute(s);
    }
    const out = new Uint8Array(32);
    for (let k = 0; k < 32; k++) out[k] = (s[k >> 2] >>> ((k & 3) * 8)) & 255;
    return out;
  };
})();
