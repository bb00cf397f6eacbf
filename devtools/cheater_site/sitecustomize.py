"""First on a process's PYTHONPATH, with UNCHAINED_CHEAT set: the process cheats (devtools.cheats)."""
from devtools.cheats import CheatSpecError, install_from_env

try:
    install_from_env()
except CheatSpecError as exc:  # site.py would print a plain exception and let the process run honestly
    raise SystemExit(f"UNCHAINED_CHEAT: {exc}") from exc
