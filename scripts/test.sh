#!/usr/bin/env bash
# The test command (README, .ci/run): installs what is missing, then runs every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
source .venv/bin/activate
# Contracts on anvil through brownie (it starts and stops anvil itself).
brownie test tests/contracts --disable-warnings
# The same contract suite on a second EVM implementation, Hardhat's node, on a free port
# (UNCHAINED_SKIP_HARDHAT=1 skips it).
if [ -z "${UNCHAINED_SKIP_HARDHAT:-}" ]; then
  port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  brownie networks modify hardhat-local port="$port" >/dev/null
  brownie test tests/contracts --network hardhat-local --disable-warnings
fi
# Everything else (protocol, services, end-to-end) with plain pytest; brownie's plugin stays off.
python -m pytest -p no:pytest-brownie tests --ignore=tests/contracts -q
