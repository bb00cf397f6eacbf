"""The build step pyproject.toml cannot declare: the contract artifacts.

A wheel carries protocol/artifacts (contracts compiled by scripts/setup.sh); building one from a
missing or stale set is refused here. Editable installs read the checkout's folder, which
`unchained deploy` refreshes itself. The package is pure Python: the provider's native keccak is
a distribution of its own (native/keccak), so a renter's install compiles nothing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _artifacts_module():
    # Loaded by path: importing the package would need its dependencies in the build env.
    spec = importlib.util.spec_from_file_location(
        "_contract_artifacts", ROOT / "unchained_cli" / "contract_artifacts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyCheckingArtifacts(build_py):
    """build_py that refuses to package missing or stale contract artifacts."""

    def run(self) -> None:
        if not getattr(self, "editable_mode", False):
            artifacts = _artifacts_module()
            folder = artifacts.checkout_folder(ROOT)
            if artifacts.in_checkout(ROOT):  # an sdist has no sources: its index was checked
                reason = artifacts.stale_reason(ROOT)
            else:
                reason = None if (folder / artifacts.INDEX).is_file() else f"{folder} is missing"
            if reason:
                raise SystemExit(f"error: contract artifacts: {reason}; run ./scripts/setup.sh "
                                 "(or python -m unchained_cli.contract_artifacts) first")
        super().run()


setup(cmdclass={"build_py": BuildPyCheckingArtifacts})
