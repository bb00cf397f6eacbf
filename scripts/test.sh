#!/usr/bin/env bash
# The test command (README, .ci/run): installs what is missing, then runs every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
source .venv/bin/activate
# Contracts on anvil through brownie (it starts and stops anvil itself).
brownie test tests/contracts --disable-warnings
# Everything else (protocol, services, end-to-end) with plain pytest; brownie's plugin stays off.
python -m pytest -p no:pytest-brownie tests --ignore=tests/contracts -q
