#!/usr/bin/env bash
# Static analysis of contracts/ with slither (its own venv, .venv-slither: scripts/setup.sh),
# compiled through forge (foundry.toml; pointed at the solcjs stand-in directly, crytic-compile
# fails). Fails on any finding docs/SLITHER_TRIAGE.md does not explain (scripts/slither_triage.py).
# forge builds into forge/slither-out here, so a `forge test` beside it keeps its own build.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# slither exits non-zero whenever it reports anything: the triage below decides.
FOUNDRY_OUT=forge/slither-out FOUNDRY_CACHE_PATH=forge/slither-cache .venv-slither/bin/slither . \
  --compile-force-framework foundry --filter-paths "node_modules|forge/test|contracts/test" \
  --json "$work/report.json" >"$work/slither.log" 2>&1 || true
if [ ! -s "$work/report.json" ]; then
  cat "$work/slither.log" >&2
  echo "slither wrote no report" >&2
  exit 2
fi
python3 scripts/slither_triage.py "$work/report.json" docs/SLITHER_TRIAGE.md
