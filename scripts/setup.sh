#!/usr/bin/env bash
# Installs everything Unchained needs into this checkout: the Python virtual environment (.venv),
# the npm toolchain (solc, anvil, forge, Hardhat, OpenZeppelin), slither in .venv-slither, and a
# Solidity compiler registered with py-solc-x, then compiles the contracts and registers the
# Hardhat network with brownie. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
python="${PYTHON:-python3}"

if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
# The provider's native keccak (native/keccak, pulled by the `provider` extra) is compiled C: say
# what is missing before pip's compiler output does.
if ! command -v "${CC:-cc}" >/dev/null 2>&1 || ! .venv/bin/python -c \
    'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("include"), "Python.h")))'; then
  echo "error: building the native keccak needs a C compiler and the Python headers" \
       "(Debian/Ubuntu: apt-get install build-essential python3-dev)" >&2
  exit 1
fi
.venv/bin/pip install --quiet --upgrade pip
# Every role and the dev tools (pyproject.toml's extras) in one install, so that brownie's exact
# pins and the services' packages resolve together; the native keccak from its folder here.
.venv/bin/pip install --quiet -e '.[dev]' ./native/keccak

npm install --no-audit --no-fund --loglevel=error

# slither (static analysis of the contracts, scripts/slither.sh) pins its own crytic-compile: a
# venv of its own beside .venv. It compiles through forge (package.json), offline.
if [ "$(.venv-slither/bin/slither --version 2>/dev/null)" != "0.11.6" ]; then
  "$python" -m venv .venv-slither
  .venv-slither/bin/pip install --quiet slither-analyzer==0.11.6
fi

# NVIDIA's local GPU attestation verifier (verifier/cc_attestation.py runs it in a child
# interpreter): a venv of its own, since its package is named `verifier`, like ours, and it pins
# its own cryptography. Its sample Hopper evidence is what tests/verifier/test_pog_identity.py checks.
# (The check runs in /tmp: the SDK writes verifier.log into the working directory at import.)
if ! (cd /tmp && "$root/.venv-nv/bin/python" -I -c "import verifier.cc_admin_utils") 2>/dev/null; then
  "$python" -m venv .venv-nv
  .venv-nv/bin/pip install --quiet nv-local-gpu-verifier==2.7.3
fi

# Debian's Chromium for the dashboard's browser tests (never a downloaded browser build).
# Skipped where apt-get is not ours to run; those tests then skip themselves.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
    && [ -z "${UNCHAINED_SKIP_BROWSER:-}" ]; then
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null || echo "chromium not installed: browser tests will skip"
fi

# bubblewrap: the model sandbox (client.sandbox) and a lease's machine (provider_agent/lease_env.py)
# run in Linux namespaces through bwrap; Debian's OpenSSH server (one sshd per lease) and client
# (`unchained lease ssh`, the lease tests); slirp4netns gives a lease its egress network (as
# rootless Podman does), iproute2 makes the host's and private ranges unreachable from it, and a
# static busybox idles in a sandbox whose root is the renter's own image.
missing_tools=""
for tool in bwrap:bubblewrap sshd:openssh-server ssh:openssh-client slirp4netns:slirp4netns ip:iproute2 \
    busybox:busybox-static; do
  if ! command -v "${tool%%:*}" >/dev/null 2>&1 && [ ! -x "/usr/sbin/${tool%%:*}" ]; then
    missing_tools="$missing_tools ${tool#*:}"
  fi
done
if [ -x /bin/busybox ] && ldd /bin/busybox >/dev/null 2>&1; then
  missing_tools="$missing_tools busybox-static"  # Debian's dynamic busybox: no use in another root
fi
if [ -n "$missing_tools" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq $missing_tools >/dev/null \
      || echo "warning:$missing_tools not installed" >&2
  else
    echo "warning: install$missing_tools (apt-get install$missing_tools): models do not run without" \
         "bubblewrap unless UNCHAINED_SANDBOX_ISOLATION=none, and leases cannot be delivered" >&2
  fi
fi

# anvil and solc where brownie and the CLI look for them: the venv's bin directory.
ln -sf "$root/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil" .venv/bin/anvil
cat > .venv/bin/solcjs-shim <<SHIM
#!/usr/bin/env bash
exec node "$root/scripts/toolchain/solcjs-shim.js" "\$@"
SHIM
chmod +x .venv/bin/solcjs-shim
.venv/bin/python scripts/toolchain/register_solc.py "$root/.venv/bin/solcjs-shim"

# Compiles with brownie and exports the deployable contracts' abi and bytecode into
# protocol/artifacts, the package data a wheel carries (`unchained deploy` reads them there).
PATH="$root/.venv/bin:$PATH" .venv/bin/python -m unchained_cli.contract_artifacts

# Hardhat's node, the second EVM the contract suite runs on (scripts/test.sh): a brownie network
# that starts `npx hardhat node` with hardhat.config.js; test.sh gives it a free port each run.
if ! PATH="$root/.venv/bin:$PATH" .venv/bin/brownie networks list 2>/dev/null | grep -q "hardhat-local"; then
  PATH="$root/.venv/bin:$PATH" .venv/bin/brownie networks add Development hardhat-local \
    cmd="npx hardhat node" host=http://127.0.0.1 port=8555 >/dev/null
fi
echo "setup complete: activate with 'source .venv/bin/activate'"
