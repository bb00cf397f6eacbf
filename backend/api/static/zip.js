// One zip of a job's result items, made in the page from the bytes it downloaded and checked,
// with fflate (vendored in ./fflate/: version and licence in the README there). Items are stored,
// not deflated: outputs of raw float values barely compress, and storing keeps the zip quick.
import { zipSync } from "/static/fflate/browser.js";

// zipFiles({ "name": Uint8Array, ... }) -> Uint8Array, a global for the classic scripts after this one
globalThis.zipFiles = (files) => zipSync(files, { level: 0 });
