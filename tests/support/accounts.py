"""anvil's development accounts (its well-known mnemonic: development only) and keystores of them."""

from __future__ import annotations

import json
from pathlib import Path

from eth_account import Account

from devtools.market import DEV_MNEMONIC, dev_account

# anvil's account 1: the provider in most service tests.
PROVIDER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"


def write_keystore(path: Path, key: bytes | str, password: str) -> Path:
    """An encrypted keystore at `path`, with a cheap scrypt (tests decrypt it many times)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(Account.encrypt(key, password, kdf="scrypt", iterations=1 << 10)))
    return path


__all__ = ["DEV_MNEMONIC", "PROVIDER_KEY", "dev_account", "write_keystore"]
