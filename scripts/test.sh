#!/usr/bin/env bash
# The test command (README, .ci/run): installs what is missing, then runs every test suite.
#
# The Python end-to-end tests run on two kinds of chain; each passes on both, CI runs each once:
# - instant mining (a transaction is mined as it arrives): protocol, services, the CLI and the
#   demo (its Ctrl-C test included);
# - a block a second, every transaction waiting for the next block as on a real chain
#   (UNCHAINED_TEST_BLOCK_TIME=1): the paid job through the market (tests/e2e/test_market_job.py)
#   and the faults on the whole market (tests/e2e/test_faults.py).
# UNCHAINED_TEST_BOTH_MODES=1 also runs those end-to-end tests in the other mode (about 5.5 more minutes
# on a quiet 2-core machine: paid job 29 s, faults 185 s, demo scenario 102 s).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
source .venv/bin/activate
# Contracts on anvil through brownie (it starts and stops anvil itself).
brownie test tests/contracts --disable-warnings
# The same contract suite on a second EVM implementation, Hardhat's node, on a free port
# (UNCHAINED_SKIP_HARDHAT=1 skips it). It runs beside the Python tests below (they wait on
# processes and blocks much of the time; the tests wait for conditions, never fixed times, so
# the extra load only makes them slower), its output kept for the end. Its invariant machines
# run 3 examples each: the full search runs on anvil above; this pass checks the second EVM.
hardhat_pid=""
hardhat_log=$(mktemp)
if [ -z "${UNCHAINED_SKIP_HARDHAT:-}" ]; then
  port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  brownie networks modify hardhat-local port="$port" >/dev/null
  UNCHAINED_INVARIANT_EXAMPLES=3 brownie test tests/contracts --network hardhat-local --disable-warnings \
    >"$hardhat_log" 2>&1 &
  hardhat_pid=$!
fi
hardhat_result() {
  [ -n "$hardhat_pid" ] || return 0
  local rc=0
  wait "$hardhat_pid" || rc=$?
  hardhat_pid=""
  echo "--- contracts on Hardhat's node ---"
  cat "$hardhat_log"
  rm -f "$hardhat_log"
  return "$rc"
}
# Reports the Hardhat pass however this script ends (a failure below included).
trap 'hardhat_result || true' EXIT
# Everything else (protocol, services, end-to-end) with plain pytest; brownie's plugin stays off.
block_time_tests=(tests/e2e/test_market_job.py tests/e2e/test_faults.py)
# Run with instant mining in CI, and with UNCHAINED_TEST_BOTH_MODES also with the block time: the demo's
# scenario (its Ctrl-C test starts `unchained demo`, whose chain does not read the variable).
instant_e2e_tests=(tests/cli/test_demo.py::test_the_demo_pays_the_honest_provider_refunds_the_cheaters_renter_and_slashes_the_cheater)
pytest=(python -m pytest -p no:pytest-brownie -q)
"${pytest[@]}" tests --ignore=tests/contracts "${block_time_tests[@]/#/--ignore=}"
UNCHAINED_TEST_BLOCK_TIME=1 "${pytest[@]}" "${block_time_tests[@]}"
if [ -n "${UNCHAINED_TEST_BOTH_MODES:-}" ]; then
  "${pytest[@]}" "${block_time_tests[@]}"
  UNCHAINED_TEST_BLOCK_TIME=1 "${pytest[@]}" "${instant_e2e_tests[@]}"
fi
trap - EXIT
hardhat_result
