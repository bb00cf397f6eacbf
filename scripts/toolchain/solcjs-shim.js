#!/usr/bin/env node
// A `solc` command-line stand-in backed by solcjs, for machines where py-solc-x cannot download
// a native compiler. It implements only what py-solc-x, brownie and forge call:
//   --version, --help, --standard-json [--allow-paths P] [--base-path P] [--include-path P],
//   --combined-json abi,bin,... FILES
"use strict";
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const args = process.argv.slice(2);

function optionValues(name) {
  const values = [];
  args.forEach((arg, i) => {
    if (arg === name && i + 1 < args.length) values.push(args[i + 1]);
    else if (arg.startsWith(name + "=")) values.push(arg.slice(name.length + 1));
  });
  return values.flatMap((v) => v.split(",")).filter(Boolean);
}

// Import roots: where a source path given by the compiler may be found.
const roots = [
  process.cwd(),
  ...optionValues("--base-path"),
  ...optionValues("--include-path"),
  ...optionValues("--allow-paths"),
];

function findImports(importPath) {
  const candidates = path.isAbsolute(importPath)
    ? [importPath]
    : roots.map((root) => path.resolve(root, importPath));
  for (const candidate of candidates) {
    if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) {
      return { contents: fs.readFileSync(candidate, "utf8") };
    }
  }
  return { error: `File not found: ${importPath} (searched ${roots.join(", ")})` };
}

// Writing then exiting at once truncates large outputs on pipes: let the stream drain.
function emit(text, code = 0) {
  process.stdout.write(text, () => {
    process.exitCode = code;
  });
}

function versionText() {
  return (
    "solc, the solidity compiler commandline interface\n" +
    `Version: ${solc.version().replace(".Emscripten.clang", "")}.Linux.g++\n`
  );
}

function readStdin() {
  return fs.readFileSync(0, "utf8");
}

function combinedJson(files, fields) {
  const sources = {};
  for (const file of files) sources[file] = { content: fs.readFileSync(file, "utf8") };
  const selection = [];
  if (fields.includes("abi")) selection.push("abi");
  if (fields.includes("bin")) selection.push("evm.bytecode.object");
  if (fields.includes("bin-runtime")) selection.push("evm.deployedBytecode.object");
  const input = {
    language: "Solidity",
    sources,
    settings: { outputSelection: { "*": { "*": selection } } },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
  const errors = (output.errors || []).filter((e) => e.severity === "error");
  if (errors.length) {
    process.stderr.write(errors.map((e) => e.formattedMessage).join("\n"));
    process.exitCode = 1;
    return;
  }
  const contracts = {};
  for (const [file, byName] of Object.entries(output.contracts || {})) {
    for (const [name, c] of Object.entries(byName)) {
      const entry = {};
      if (fields.includes("abi")) entry.abi = c.abi;
      if (fields.includes("bin")) entry.bin = c.evm.bytecode.object;
      if (fields.includes("bin-runtime")) entry["bin-runtime"] = c.evm.deployedBytecode.object;
      contracts[`${file}:${name}`] = entry;
    }
  }
  emit(JSON.stringify({ contracts, version: solc.version() }));
}

if (args.includes("--version")) {
  emit(versionText());
} else if (args.includes("--help")) {
  emit(versionText() + "Usage: solc [options] [input_file...]\n  --standard-json\n  --combined-json abi,bin,bin-runtime\n");
} else if (args.includes("--standard-json")) {
  emit(solc.compile(readStdin(), { import: findImports }));
} else if (args.includes("--combined-json")) {
  const fields = optionValues("--combined-json");
  const valueOptions = new Set(["--combined-json", "--allow-paths", "--base-path", "--include-path"]);
  const files = args.filter((a, i) => !a.startsWith("--") && !valueOptions.has(args[i - 1]));
  combinedJson(files, fields);
} else {
  process.stderr.write(`solcjs shim: unsupported arguments: ${args.join(" ")}\n`);
  process.exitCode = 2;
}
