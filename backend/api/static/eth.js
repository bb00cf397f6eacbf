// Amounts, dates and contract calls for the browser wallet: ETH from wei strings with BigInt
// (exact), and ABI encoding of the few static-argument calls the page makes itself.
"use strict";
const eth = (() => {
  const WEI = 10n ** 18n;
  function format(wei) {  // "1500000000000000" -> "0.0015 ETH"
    if (wei === null || wei === undefined || wei === "") return "—";
    const v = BigInt(wei), sign = v < 0n ? "-" : "", a = v < 0n ? -v : v;
    const frac = (a % WEI).toString().padStart(18, "0").replace(/0+$/, "");
    return `${sign}${a / WEI}${frac ? "." + frac : ""} ETH`;
  }
  // For people: 4 significant digits (at most 4 decimals from 1 ETH up), "≈" when that rounds;
  // the exact value in wei on hover. Payments are confirmed with `format`, exact.
  function rounded(wei) {
    const v = BigInt(wei), a = v < 0n ? -v : v;
    if (a === 0n) return { text: "0 ETH", exact: true };
    const digits = a.toString().length, keep = a >= WEI ? Math.min(digits, digits - 18 + 4) : 4;
    const unit = 10n ** BigInt(Math.max(0, digits - keep));
    const r = (a + unit / 2n) / unit * unit;
    return { text: format(v < 0n ? -r : r), exact: r === a };
  }
  function amount(wei) {
    if (wei === null || wei === undefined || wei === "") return "—";
    const { text, exact } = rounded(wei);
    return `<span class="amount" title="${BigInt(wei)} wei (${format(wei)})">${exact ? "" : "≈"}${text}</span>`;
  }
  function parse(text) {  // "0.0015" -> 1500000000000000n; refuses what is not a plain decimal
    const m = /^\s*(\d+)(?:\.(\d{0,18}))?\s*$/.exec(text);
    if (!m) throw new Error(`"${text}" is not an amount in ETH (e.g. 0.01, at most 18 decimals)`);
    return BigInt(m[1]) * WEI + BigInt((m[2] || "").padEnd(18, "0"));
  }
  const date = (unix) => unix == null ? "—" : new Date(Number(unix) * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  const duration = (seconds) => {
    const s = Math.max(0, Math.floor(seconds)), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return h ? `${h} h ${m} min` : m ? `${m} min ${s % 60} s` : `${s} s`;
  };
  const selector = (signature) => merkle.bytesToHex(keccak256(new TextEncoder().encode(signature))).slice(0, 10);
  const word = (value) => {  // one static argument: uint or address
    const v = typeof value === "string" && value.startsWith("0x") ? BigInt(value) : BigInt(value);
    if (v < 0n || v >= 2n ** 256n) throw new Error(`argument out of range: ${value}`);
    return v.toString(16).padStart(64, "0");
  };
  const encode = (signature, args = []) => selector(signature) + args.map(word).join("");
  // A call whose static arguments (words) are followed by one `bytes` argument (a signature):
  // the head holds the words and the offset of the bytes; the tail their length and padded data.
  const encodeWithBytes = (signature, args, bytesHex) => {
    const clean = bytesHex.startsWith("0x") ? bytesHex.slice(2) : bytesHex;
    if (!/^([0-9a-fA-F]{2})*$/.test(clean)) throw new Error(`not hex bytes: ${bytesHex}`);
    return encode(signature, [...args, (args.length + 1) * 32, clean.length / 2]) +
      clean.toLowerCase().padEnd(Math.ceil(clean.length / 64) * 64, "0");
  };
  const words = (data) => (data.slice(2).match(/.{64}/g) || []).map((w) => "0x" + w);
  return { format, amount, parse, date, duration, selector, word, encode, encodeWithBytes, words };
})();
