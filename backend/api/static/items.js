// A result item's preview, in the item format of protocol/jobs.py (README "Item files"): one
// JSON header line naming dtype and shape, a newline, then the values as raw little-endian bytes
// in C order, exactly prod(shape) * itemsize of them. The bytes are untrusted: every mismatch is
// one sentence, as decode_output says it.
"use strict";
const items = (() => {
  const DTYPES = { float32: [4, "getFloat32"], float16: [2, null], int64: [8, "getBigInt64"],
                   int32: [4, "getInt32"], uint8: [1, "getUint8"] };
  const MAX_HEADER = 4096;
  // IEEE 754 half precision (DataView has no getFloat16 in every browser yet).
  function half(bits) {
    const sign = bits & 0x8000 ? -1 : 1, exp = (bits >> 10) & 0x1f, frac = bits & 0x3ff;
    if (exp === 0) return sign * frac * 2 ** -24;
    if (exp === 31) return frac ? NaN : sign * Infinity;
    return sign * (1 + frac / 1024) * 2 ** (exp - 15);
  }
  // -> { dtype, shape, count, values (the first `first`, as numbers or BigInts) }; throws why not.
  function decode(bytes, first = 8) {
    const newline = bytes.subarray(0, MAX_HEADER).indexOf(10);
    if (newline < 0) throw new Error("no header line: not an item file (a JSON line naming dtype and shape first)");
    let meta;
    try { meta = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, newline))); } catch {
      throw new Error("the first line is not a JSON header naming dtype and shape");
    }
    const spec = DTYPES[meta?.dtype];
    if (!spec) throw new Error(`the header names dtype ${JSON.stringify(meta?.dtype)}; item files hold ${Object.keys(DTYPES).join(", ")}`);
    if (!Array.isArray(meta.shape) || !meta.shape.every((d) => Number.isInteger(d) && d >= 0)) {
      throw new Error(`the header's shape ${JSON.stringify(meta.shape)} is not a list of sizes`);
    }
    const count = meta.shape.reduce((a, d) => a * d, 1), [size, getter] = spec;
    const body = bytes.length - newline - 1;
    if (body !== count * size) throw new Error(`the values are ${body} bytes; dtype ${meta.dtype} and shape [${meta.shape}] need ${count * size}`);
    const view = new DataView(bytes.buffer, bytes.byteOffset + newline + 1, body);
    const values = [];
    for (let i = 0; i < Math.min(first, count); i++) {
      values.push(getter ? view[getter](i * size, true) : half(view.getUint16(i * size, true)));
    }
    return { dtype: meta.dtype, shape: meta.shape, count, values };
  }
  const number = (v) => typeof v === "bigint" ? v.toString() : Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
  // "float32 [8]: 0.25, 2.25, 4.25 … (8 values)"
  function describe(item) {
    const more = item.count > item.values.length ? ` … (${item.count} values)` : "";
    return `${item.dtype} [${item.shape.join(", ")}]: ${item.values.map(number).join(", ")}${more}`;
  }
  return { decode, describe };
})();
