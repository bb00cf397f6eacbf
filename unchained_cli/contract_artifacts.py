"""The compiled contracts (ABI + bytecode) shipped inside the package as protocol/artifacts/.

`scripts/setup.sh` compiles with brownie and exports every deployable contract of contracts/
there (`python -m unchained_cli.contract_artifacts`); a wheel carries them as package data, so
`unchained deploy` works from an installed package with no checkout, brownie build or solc.
`index.json` records a digest of the sources they were compiled from: in a checkout a stale set
is recompiled before deploying (`ensure_fresh`), and setup.py refuses to build a wheel from a
stale or missing set.

Only the standard library is imported here: setup.py loads this file by path while building.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "protocol"  # the data sits beside protocol/ (pure: these are files, no code)
FOLDER = "artifacts"
INDEX = "index.json"
# What the bytecode depends on: the sources and the compiler settings.
CONFIG_FILE = "brownie-config.yaml"
SOURCES_DIR = "contracts"
_KEPT = ("contractName", "abi", "bytecode", "deployedBytecode", "sourcePath", "compiler")


class ArtifactError(RuntimeError):
    """The packaged contract artifacts are missing, stale or cannot be produced."""


def sources_digest(root: Path = REPO_ROOT) -> str:
    """sha256 over contracts/**/*.sol (paths and bytes, in path order) and brownie-config.yaml."""
    digest = hashlib.sha256()
    files = sorted((root / SOURCES_DIR).rglob("*.sol")) + [root / CONFIG_FILE]
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def in_checkout(root: Path = REPO_ROOT) -> bool:
    """True when the package runs from its source tree (the sources sit beside it)."""
    return (root / SOURCES_DIR).is_dir() and (root / CONFIG_FILE).is_file()


def checkout_folder(root: Path = REPO_ROOT) -> Path:
    return root / PACKAGE / FOLDER


def _packaged(name: str) -> Any:
    return resources.files(PACKAGE) / FOLDER / name


def _missing() -> ArtifactError:
    return ArtifactError(
        "this installation carries no contract artifacts (protocol/artifacts): in a checkout "
        "run ./scripts/setup.sh; a wheel must be built after it")


def read_index() -> dict[str, Any] | None:
    """The packaged index (sources digest, contract names), or None when there is none."""
    entry = _packaged(INDEX)
    if not entry.is_file():
        return None
    index: dict[str, Any] = json.loads(entry.read_text())
    return index


def load(name: str) -> dict[str, Any]:
    """The packaged artifact of contract `name`: abi, bytecode, deployedBytecode, ..."""
    index = read_index()
    if index is None:
        raise _missing()
    if name not in index["contracts"]:
        raise ArtifactError(f"no contract artifact for {name}; packaged: "
                            f"{', '.join(index['contracts'])}")
    artifact: dict[str, Any] = json.loads(_packaged(f"{name}.json").read_text())
    return artifact


def stale_reason(root: Path = REPO_ROOT, folder: Path | None = None) -> str | None:
    """Why the checkout's exported artifacts do not match its sources, or None when they do."""
    index_path = (folder or checkout_folder(root)) / INDEX
    if not index_path.is_file():
        return f"{index_path} is missing"
    recorded = json.loads(index_path.read_text()).get("sourcesDigest")
    if recorded != sources_digest(root):
        return f"{index_path} records other sources than {root / SOURCES_DIR} holds"
    return None


def export(build_dir: Path, out: Path, digest: str) -> list[str]:
    """Writes each deployable contract of contracts/ found in brownie's build to `out` (abi,
    bytecode and compiler settings only), then the index; removes artifacts no longer built."""
    chosen: dict[str, dict[str, Any]] = {}
    for path in sorted(build_dir.glob("*.json")):
        artifact = json.loads(path.read_text())
        if (artifact.get("type") == "contract" and artifact.get("bytecode")
                and str(artifact.get("sourcePath", "")).startswith(f"{SOURCES_DIR}/")):
            chosen[artifact["contractName"]] = {key: artifact[key] for key in _KEPT}
    if not chosen:
        raise ArtifactError(f"no deployable contract in {build_dir}: did brownie compile?")
    out.mkdir(parents=True, exist_ok=True)
    (out / INDEX).unlink(missing_ok=True)  # a crash below leaves the set marked missing
    for old in out.glob("*.json"):
        if old.stem not in chosen:
            old.unlink()
    for name, artifact in chosen.items():
        _write(out / f"{name}.json", artifact)
    _write(out / INDEX, {"sourcesDigest": digest, "contracts": sorted(chosen)})
    return sorted(chosen)


def _write(path: Path, document: Any) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)  # concurrent readers never see half a file


def compile_and_export(root: Path = REPO_ROOT) -> list[str]:
    """`brownie compile` in the checkout, then export; the digest is taken before compiling,
    so a source edited meanwhile leaves the set marked stale rather than wrongly fresh."""
    digest = sources_digest(root)
    brownie = Path(sys.executable).with_name("brownie")
    env = dict(os.environ, PATH=os.pathsep.join([str(brownie.parent), os.environ.get("PATH", "")]))
    result = subprocess.run([str(brownie), "compile"], cwd=root, capture_output=True, text=True,
                            env=env, check=False)
    if result.returncode != 0:
        raise ArtifactError(f"brownie compile failed:\n{result.stdout}\n{result.stderr}")
    return export(root / "build" / "contracts", checkout_folder(root), digest)


def ensure_fresh() -> None:
    """In a checkout: recompile and export when the sources changed since the last export.
    Installed: the packaged set must be present (it was checked when the wheel was built)."""
    if in_checkout():
        if stale_reason() is not None:
            compile_and_export()
    elif read_index() is None:
        raise _missing()


def main() -> None:
    try:
        names = compile_and_export()
    except ArtifactError as err:
        sys.exit(f"error: {err}")
    print(f"exported {len(names)} contract artifacts to {checkout_folder()}: {', '.join(names)}")


if __name__ == "__main__":
    main()
