"""Give py-solc-x (and so brownie) a solc 0.8.24.

A native binary is preferred; where it cannot be downloaded (no access to the Solidity site),
the solcjs-backed shim given as argv[1] is registered in its place.
"""

import shutil
import sys
from pathlib import Path

import solcx

VERSION = "0.8.24"


def main(shim: str) -> None:
    if any(str(v) == VERSION for v in solcx.get_installed_solc_versions()):
        return
    try:
        solcx.install_solc(VERSION, show_progress=False)
        print(f"installed native solc {VERSION}")
        return
    except Exception as exc:  # network errors come in many types; any of them means "use the shim"
        print(f"native solc {VERSION} unavailable ({type(exc).__name__}); using solcjs")
    target = Path(solcx.get_solcx_install_folder()) / f"solc-v{VERSION}"
    shutil.copy(shim, target)
    target.chmod(0o755)
    solcx.set_solc_version(VERSION)


if __name__ == "__main__":
    main(sys.argv[1])
