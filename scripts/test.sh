#!/usr/bin/env bash
# The test command (README, .ci/run): installs what is missing, then runs every test suite.
#
# The Python end-to-end tests run on two kinds of chain; each passes on both, CI runs each once,
# all in one pytest run:
# - instant mining (a transaction is mined as it arrives): protocol, services, the CLI and the
#   demo (its Ctrl-C test included);
# - a block a second, every transaction waiting for the next block as on a real chain: the
#   modules marked `block_time`, the paid job through the market (tests/e2e/test_market_job.py)
#   and the faults on the whole market (tests/e2e/test_faults.py). UNCHAINED_TEST_BLOCK_TIME, where
#   set, puts every module on that kind of chain (0: instant mining).
# UNCHAINED_TEST_BOTH_MODES=1 also runs those end-to-end tests in the other mode (about 5.5 more minutes
# on a quiet 2-core machine: paid job 29 s, faults 185 s, demo scenario 102 s).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
source .venv/bin/activate
# The cheap checks first (seconds; pyproject.toml configures both): lint rules over the tree, then
# types (strict on protocol/ and client/).
ruff check .
mypy
# The suites mostly wait (on chains, processes and blocks): on a quiet 2-core machine the Python
# tests alone keep about one core busy. So the two contract passes run in the background, beside
# the Python tests, and those run on two pytest-xdist workers, whole modules at a time (module
# fixtures such as a market or a private Redis stay within one worker; each worker starts its own
# session chains). Tests wait for conditions with bounds, never for fixed times: the extra load
# only makes them slower. Each background pass's output is kept and shown at the end.
#
# Contracts on anvil through brownie (it starts and stops anvil itself, on 8545).
background_pids=()
background_logs=()
background_names=()
in_background() {
  local name=$1 log
  shift
  log=$(mktemp)
  "$@" >"$log" 2>&1 &
  background_pids+=("$!")
  background_logs+=("$log")
  background_names+=("$name")
}
background_results() {
  local rc=0 i
  for i in "${!background_pids[@]}"; do
    wait "${background_pids[$i]}" || rc=1
    echo "--- ${background_names[$i]} ---"
    cat "${background_logs[$i]}"
    rm -f "${background_logs[$i]}"
  done
  background_pids=()
  return "$rc"
}
# Reports the background passes however this script ends (a failure below included).
trap 'background_results || true' EXIT
# The same contract suite on a second EVM implementation, Hardhat's node, on a free port
# (UNCHAINED_SKIP_HARDHAT=1 skips it). Its invariant machines run 3 examples each: the full
# search runs on anvil; this pass checks the second EVM. The port is written to brownie's
# network settings before either pass starts (both read that file).
if [ -z "${UNCHAINED_SKIP_HARDHAT:-}" ]; then
  port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  brownie networks modify hardhat-local port="$port" >/dev/null
fi
# Brownie's first load of the project after setup drops build files it does not keep (compiled
# OpenZeppelin interfaces): load it once here, so that the two passes never load it while the
# other rewrites it.
brownie compile >/dev/null
in_background "contracts on anvil" brownie test tests/contracts --disable-warnings
if [ -z "${UNCHAINED_SKIP_HARDHAT:-}" ]; then
  in_background "contracts on Hardhat's node" env UNCHAINED_INVARIANT_EXAMPLES=3 \
    brownie test tests/contracts --network hardhat-local --disable-warnings
fi
# Foundry's forge runs the Solidity invariant tests (forge/test: honest parties never lose; 100,000
# calls, foundry.toml), then slither fails on any finding docs/SLITHER_TRIAGE.md does not explain.
# One pass, after each other: both compile with solcjs, and CPU is what the others need.
# ScenariosOpenTest holds attacks not defended yet (docs/THREATS.md): left out until they are.
in_background "forge invariant tests and slither" bash -c \
  'node_modules/.bin/forge test --no-match-contract Open && ./scripts/slither.sh'
# Everything else (protocol, services, end-to-end) with plain pytest; brownie's plugin stays off.
# The block-time modules wait on blocks most of the time: in the same run as the rest, a worker
# busy with them leaves the CPU to the other worker and the contract passes.
pytest=(python -m pytest -p no:pytest-brownie -q -n "${UNCHAINED_TEST_WORKERS:-2}" --dist loadfile)
"${pytest[@]}" tests --ignore=tests/contracts
if [ -n "${UNCHAINED_TEST_BOTH_MODES:-}" ]; then
  UNCHAINED_TEST_BLOCK_TIME=0 "${pytest[@]}" -m block_time tests --ignore=tests/contracts
  # The demo's scenario with the block time (its Ctrl-C test starts `unchained demo`, whose chain
  # does not read the variable).
  UNCHAINED_TEST_BLOCK_TIME=1 "${pytest[@]}" \
    tests/cli/test_demo.py::test_the_demo_pays_the_honest_provider_refunds_the_cheaters_renter_and_slashes_the_cheater
fi
trap - EXIT
background_results
