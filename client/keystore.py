"""The keystore loader and the password story of every command that signs.

A key lives in an encrypted eth-account (Web3 Secret Storage v3) JSON keystore. Its password
comes, in this order, from:
1. a password FILE given as `--password-file FILE` (its first line is the password);
2. the file named by the UNCHAINED_PASSWORD_FILE variable (it holds the file's path, never the
   password: a variable is inherited by every child process and readable in /proc);
3. a prompt on the terminal, when there is one.
Anything else is refused with one line saying what to pass. The password is never put into an
environment variable, a log line or an exception message. A wrong password says so by name
("wrong password for keystore PATH"), never eth-account's "MAC mismatch".

New keystores go to `default_keystore_dir()` (~/.unchained/keystores) as `<address>.json`,
created with mode 0600 in a 0700 directory.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from client.errors import KeystoreError, PasswordUnavailable, WrongPassword

# eth-account and eth-utils load where a key is read or made: every command's options name
# PASSWORD_FILE_HELP, and a read command (`job status`) starts without them.
if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount
    from eth_typing import ChecksumAddress

PASSWORD_FILE_ENV = "UNCHAINED_PASSWORD_FILE"
MAX_PASSWORD_FILE_BYTES = 4096  # a password file, not a dictionary: refuse anything larger
PASSWORD_FILE_HELP = ("File whose first line is the keystore's password; default: the file named by "
                      f"${PASSWORD_FILE_ENV}, else a prompt.")
_KEY_PATTERN = re.compile(r"^(0x)?([0-9a-fA-F]{64})$")


def default_keystore_dir() -> Path:
    """Where `unchained account new|import|list` keep keystores unless given `--dir`."""
    return Path.home() / ".unchained" / "keystores"


@dataclass(frozen=True)
class KeystoreEntry:
    address: str  # checksummed, never shortened
    path: Path


# -- passwords --------------------------------------------------------------------------------

def read_password_file(path: Path) -> str:
    """The first line of `path` without its line ending (spaces inside it are kept)."""
    try:
        data = path.read_bytes()[:MAX_PASSWORD_FILE_BYTES + 1]
    except OSError as exc:
        raise PasswordUnavailable(f"cannot read password file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_PASSWORD_FILE_BYTES:
        raise PasswordUnavailable(f"password file {path} is larger than {MAX_PASSWORD_FILE_BYTES} bytes: "
                                  "it should hold one line, the password")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise PasswordUnavailable(f"password file {path} is not UTF-8 text") from None
    lines = text.splitlines()
    password = lines[0] if lines else ""
    if not password:
        raise PasswordUnavailable(f"password file {path} is empty: its first line is the password")
    return password


def password_file_from_env(environ: Mapping[str, str] | None = None) -> Path | None:
    value = (os.environ if environ is None else environ).get(PASSWORD_FILE_ENV, "").strip()
    return Path(value).expanduser() if value else None


def _interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stdin
        return False


def get_password(what: str, password_file: Path | None = None, *, confirm: bool = False,
                 environ: Mapping[str, str] | None = None) -> str:
    """The password for `what` (e.g. "keystore ~/k.json"): from `password_file`, else the file
    named by UNCHAINED_PASSWORD_FILE, else a terminal prompt (asked twice when `confirm`)."""
    source = password_file or password_file_from_env(environ)
    if source is not None:
        return read_password_file(source)
    if not _interactive():
        raise PasswordUnavailable(f"no password for {what}: pass --password-file FILE or set "
                                  f"{PASSWORD_FILE_ENV}=FILE (no terminal to ask on)")
    password = getpass.getpass(f"password for {what}: ")
    if not password:
        raise PasswordUnavailable(f"empty password for {what}")
    if confirm and getpass.getpass("repeat it: ") != password:
        raise PasswordUnavailable(f"the two passwords for {what} differ")
    return password


# -- reading keystores ------------------------------------------------------------------------

def read_keystore(path: Path) -> dict[str, Any]:
    """The keystore document, checked to be an eth-account v3 keystore (not decrypted)."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise KeystoreError(path, f"cannot read it: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise KeystoreError(path, "not JSON, so not an eth-account keystore") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("crypto", doc.get("Crypto")), dict) \
            or doc.get("version") != 3:
        raise KeystoreError(path, "not an eth-account (Web3 Secret Storage v3) keystore")
    return doc


def keystore_address(path: Path, doc: dict[str, Any] | None = None) -> ChecksumAddress | None:
    """The checksummed address a keystore says it holds (unverified until decrypted)."""
    from eth_utils import to_checksum_address

    doc = read_keystore(path) if doc is None else doc
    raw = doc.get("address")
    try:
        return to_checksum_address(raw if str(raw).startswith("0x") else f"0x{raw}") if raw else None
    except ValueError:
        return None


def load_keystore(path: Path, password_file: Path | None = None, *, password: str | None = None,
                  environ: Mapping[str, str] | None = None) -> LocalAccount:
    """Decrypts the keystore at `path` into a signing account that stays in this process.

    `password` is for callers that hold one in memory already (an in-process test or demo);
    commands pass `password_file` (their --password-file) and let the story above apply."""
    from eth_account import Account

    path = Path(path).expanduser()
    doc = read_keystore(path)
    if password is None:
        password = get_password(f"keystore {path}", password_file, environ=environ)
    try:
        key = Account.decrypt(doc, password)
    except ValueError as exc:
        if "MAC mismatch" in str(exc):
            raise WrongPassword(path) from None
        raise KeystoreError(path, f"cannot decrypt it: {exc}") from None
    except (KeyError, TypeError) as exc:
        raise KeystoreError(path, f"malformed keystore (missing {exc})") from None
    account: LocalAccount = Account.from_key(key)
    claimed = keystore_address(path, doc)
    if claimed is not None and claimed != account.address:
        raise KeystoreError(path, f"it says it holds {claimed} but its key is {account.address}")
    return account


# -- writing and listing keystores ------------------------------------------------------------

def parse_private_key(text: str) -> bytes:
    """32 bytes from 64 hex digits (0x optional); the key itself never appears in an error."""
    match = _KEY_PATTERN.match(text.strip())
    if match is None:
        raise KeystoreError(Path("-"), "the private key must be 64 hex digits (0x optional)")
    key = bytes.fromhex(match.group(2))
    if not 0 < int.from_bytes(key, "big") < 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141:
        raise KeystoreError(Path("-"), "the private key is outside the secp256k1 range")
    return key


def _write_new(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeystoreError(path, "already exists; nothing was overwritten") from None
    except OSError as exc:
        raise KeystoreError(path, f"cannot create it: {exc.strerror or exc}") from None
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def new_keystore(directory: Path, password: str, private_key: bytes | None = None, *,
                 kdf: Literal["pbkdf2", "scrypt"] = "scrypt", iterations: int | None = None) -> KeystoreEntry:
    """Encrypts `private_key` (a fresh random one by default) into `<directory>/<address>.json`."""
    from eth_account import Account

    account: LocalAccount = Account.from_key(private_key) if private_key is not None else Account.create()
    doc = Account.encrypt(account.key, password, kdf=kdf, iterations=iterations)
    path = Path(directory).expanduser() / f"{account.address}.json"
    _write_new(path, json.dumps(doc).encode())
    return KeystoreEntry(account.address, path)


def import_keystore(source: Path, directory: Path, password_file: Path | None = None, *,
                    password: str | None = None) -> KeystoreEntry:
    """Copies an existing keystore into `directory` once its password is shown to open it."""
    account = load_keystore(source, password_file, password=password)
    path = Path(directory).expanduser() / f"{account.address}.json"
    _write_new(path, Path(source).expanduser().read_bytes())
    return KeystoreEntry(account.address, path)


def list_keystores(directory: Path) -> list[KeystoreEntry]:
    """Every keystore in `directory` (files that are not keystores are left out), by address."""
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.iterdir()):
        if not path.is_file():
            continue
        try:
            address = keystore_address(path)
        except KeystoreError:
            continue
        if address is not None:
            found.append(KeystoreEntry(address, path))
    return sorted(found, key=lambda e: (e.address.lower(), str(e.path)))


__all__ = ["KeystoreEntry", "MAX_PASSWORD_FILE_BYTES", "PASSWORD_FILE_ENV", "PASSWORD_FILE_HELP", "default_keystore_dir", "get_password",
           "import_keystore", "keystore_address", "list_keystores", "load_keystore", "new_keystore",
           "parse_private_key", "password_file_from_env", "read_keystore", "read_password_file"]
