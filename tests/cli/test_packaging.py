"""The package stands alone: a wheel built from this checkout carries the compiled contracts, is
pure Python (the native keccak is the provider extra's own distribution, native/keccak), and
`unchained deploy` from it works outside the repository."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from web3 import Web3

from protocol.deployments import Deployment
from unchained_cli import contract_artifacts
from unchained_cli.deploy import DeployError, load_artifact

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DEPLOYED = {"Staking", "ProviderRegistry", "JobEscrow", "LeaseManager", "ProofOfGpu",
            "DisputeCommittee", "ChallengeManager", "TestStablecoin"}
# What a source tree holds besides the package (and what an earlier build left in it).
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", ".home", "node_modules", "build", "reports",
                                     "data", "deployments", "*.egg-info", "__pycache__", "*.so",
                                     "dist")


def test_packaged_artifacts_are_fresh_and_hold_every_deployed_contract():
    assert contract_artifacts.stale_reason() is None, "run python -m unchained_cli.contract_artifacts"
    index = contract_artifacts.read_index()
    assert DEPLOYED <= set(index["contracts"])
    built = json.loads((REPO / "build" / "contracts" / "Staking.json").read_text())
    staking = load_artifact("Staking")
    assert staking["bytecode"] == built["bytecode"] and staking["abi"] == built["abi"]


def test_unknown_contract_is_a_deploy_error():
    with pytest.raises(DeployError, match="no contract artifact for Nope"):
        load_artifact("Nope")


def test_an_edited_source_makes_the_artifacts_stale(tmp_path):
    shutil.copytree(REPO / "contracts", tmp_path / "contracts")
    shutil.copy(REPO / "brownie-config.yaml", tmp_path)
    folder = contract_artifacts.checkout_folder(tmp_path)
    assert contract_artifacts.stale_reason(tmp_path) == f"{folder / 'index.json'} is missing"
    names = contract_artifacts.export(REPO / "build" / "contracts", folder,
                                      contract_artifacts.sources_digest(tmp_path))
    assert DEPLOYED <= set(names) and "IStaking" not in names  # interfaces have no bytecode
    assert contract_artifacts.stale_reason(tmp_path) is None
    source = tmp_path / "contracts" / "Staking.sol"
    source.write_text(source.read_text() + "\n// edited\n")
    assert "other sources" in contract_artifacts.stale_reason(tmp_path)


def _wheel(source: Path, out: Path) -> subprocess.CompletedProcess:
    # No build isolation: setuptools comes from this venv (nothing is downloaded).
    return subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "-w", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)


def test_no_wheel_is_built_from_stale_artifacts(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=NOT_SOURCES)
    sol = source / "contracts" / "JobEscrow.sol"
    sol.write_text(sol.read_text() + "\n// edited after the last compile\n")
    result = _wheel(source, tmp_path / "dist")
    assert result.returncode != 0
    assert "contract artifacts" in result.stdout + result.stderr
    assert not list(tmp_path.rglob("*.whl"))


@pytest.fixture(scope="module")
def chain(chains):
    """The session chain (reverted afterwards): the wheel's deploy adds a contract set to it."""
    return chains.get().local


def test_wheel_installed_outside_the_checkout_deploys(chain, tmp_path):
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=NOT_SOURCES)
    built = _wheel(source, tmp_path / "dist")
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("unchained-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "protocol/artifacts/index.json" in names and "protocol/artifacts/Staking.json" in names
    assert wheel.name.endswith("-py3-none-any.whl") and not [n for n in names if n.endswith((".so", ".c"))]
    assert {"backend/api/static/dashboard.html", "backend/api/static/noble-hashes/sha3.js",
            "backend/api/static/noble-hashes/LICENSE", "backend/api/static/fflate/browser.js",
            "backend/api/static/fflate/LICENSE", "backend/api/static/zip.js", "backend/api/static/items.js",
            "backend/migrations/env.py",
            "backend/migrations/script.py.mako",
            "backend/migrations/versions/0001_initial_schema.py"} <= set(names)
    # The renter's side ships; the dev tools (benches, market launcher, cheating provider) do not.
    assert "renter/cli.py" in names and "unchained_cli/dev.py" in names
    assert not [n for n in names if n.startswith("devtools/")]

    # A fresh venv holding only the wheel; the dependencies come from this venv's site-packages
    # through a plain .pth line (its own .pth files, the checkout's editable finder among them,
    # are not processed there, so nothing resolves to the checkout).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                    "--no-index", "--quiet", str(wheel)], check=True, timeout=300)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "main-venv.pth").write_text(sysconfig.get_path("purelib") + "\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", "import protocol, unchained_keccak, unchained_cli;"
                            "print(protocol.__file__, unchained_cli.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, check=True).stdout
    assert str(REPO) not in where and where.count(site) == 2, where

    out = tmp_path / "out"
    result = subprocess.run([str(venv / "bin" / "unchained"), "deploy", "--rpc", chain.rpc_url,
                             "--out", str(out)], cwd=elsewhere, env=env, capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    deployment = Deployment.from_json(json.loads((out / "31337.json").read_text()))
    assert set(deployment.contracts) == DEPLOYED
    web3 = Web3(Web3.HTTPProvider(chain.rpc_url))
    for name, contract in deployment.contracts.items():
        # The packaged runtime code, with constructor-set immutables filled in: same length.
        expected = bytes.fromhex(load_artifact(name)["deployedBytecode"].removeprefix("0x"))
        assert len(web3.eth.get_code(contract.address)) == len(expected), name

    # Without the checkout the dev commands refuse in one line, whatever their options.
    for argv in (["bench", "--only", "gas"], ["demo"], ["up", "--port", "1"]):
        refused = subprocess.run([str(venv / "bin" / "unchained"), *argv], cwd=elsewhere, env=env,
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert refused.stderr == (f"error: `unchained {argv[0]}` needs a source checkout: it runs the dev tools "
                                  "(devtools/), which the installed package does not ship; clone the repository "
                                  "and run it there\n"), refused.stderr
