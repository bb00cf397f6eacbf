"""The one keystore loader and its password story (client.keystore)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from eth_account import Account

from client import KeystoreError, PasswordUnavailable, WrongPassword
from client.keystore import (PASSWORD_FILE_ENV, import_keystore, list_keystores, load_keystore, new_keystore,
                             parse_private_key, read_password_file)

KEY = bytes.fromhex("59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
ADDRESS = Account.from_key(KEY).address
CHEAP = dict(kdf="scrypt", iterations=1 << 10)  # test keys only: the commands use eth-account's default cost


def password_file(directory: Path, text: str = "correct horse\n", name: str = "password") -> Path:
    path = directory / name
    path.write_text(text)
    return path


@pytest.fixture
def keystore(tmp_path: Path) -> Path:
    return new_keystore(tmp_path / "keys", "correct horse", KEY, **CHEAP).path


def test_new_keystore_is_private_and_opens_with_its_password_file(tmp_path: Path) -> None:
    entry = new_keystore(tmp_path / "keys", "correct horse", KEY, **CHEAP)
    assert entry.address == ADDRESS and entry.path == tmp_path / "keys" / f"{ADDRESS}.json"
    assert stat.S_IMODE(entry.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(entry.path.parent.stat().st_mode) == 0o700
    account = load_keystore(entry.path, password_file(tmp_path), environ={})
    assert account.address == ADDRESS and account.key == KEY


def test_wrong_password_says_so_in_one_line_never_mac_mismatch(tmp_path: Path, keystore: Path) -> None:
    with pytest.raises(WrongPassword) as raised:
        load_keystore(keystore, password_file(tmp_path, "not it\n"), environ={})
    assert str(raised.value) == f"wrong password for keystore {keystore}"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_password_file_named_by_the_variable_and_the_flag_wins(tmp_path: Path, keystore: Path) -> None:
    right, wrong = password_file(tmp_path), password_file(tmp_path, "wrong\n", "other")
    assert load_keystore(keystore, environ={PASSWORD_FILE_ENV: str(right)}).address == ADDRESS
    assert load_keystore(keystore, right, environ={PASSWORD_FILE_ENV: str(wrong)}).address == ADDRESS
    with pytest.raises(WrongPassword):
        load_keystore(keystore, wrong, environ={PASSWORD_FILE_ENV: str(right)})


def test_a_password_in_a_variable_is_never_read(keystore: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old variables that carried the password itself are gone: with no file and no
    terminal, loading refuses and names the two ways that work."""
    for name in ("UNCHAINED_KEYSTORE_PASSWORD", "UNCHAINED_PROVIDER_KEYSTORE_PASSWORD",
                 "UNCHAINED_VERIFIER_KEYSTORE_PASSWORD", PASSWORD_FILE_ENV):
        monkeypatch.setenv(name, "correct horse")
    monkeypatch.delenv(PASSWORD_FILE_ENV)
    with pytest.raises(PasswordUnavailable, match="pass --password-file FILE or set UNCHAINED_PASSWORD_FILE=FILE"):
        load_keystore(keystore)


def test_password_file_rules(tmp_path: Path) -> None:
    assert read_password_file(password_file(tmp_path, "with spaces inside \r\nsecond line\n")) == "with spaces inside "
    assert read_password_file(password_file(tmp_path, "no newline")) == "no newline"
    for text, message in (("", "is empty"), ("\nlater\n", "is empty"), ("x" * 5000, "larger than")):
        with pytest.raises(PasswordUnavailable, match=message):
            read_password_file(password_file(tmp_path, text))
    with pytest.raises(PasswordUnavailable, match="cannot read password file"):
        read_password_file(tmp_path / "missing")


@pytest.mark.parametrize("content, message", [
    ("not json", "not JSON"),
    ('{"version": 3}', "not an eth-account"),
    ('[1, 2]', "not an eth-account"),
])
def test_files_that_are_not_keystores_are_refused_before_any_password(tmp_path: Path, content: str,
                                                                       message: str) -> None:
    path = tmp_path / "k.json"
    path.write_text(content)
    with pytest.raises(KeystoreError, match=message):
        load_keystore(path, tmp_path / "no-password-file-needed")
    with pytest.raises(KeystoreError, match="cannot read it"):
        load_keystore(tmp_path / "missing.json", tmp_path / "unused")


def test_keystore_that_lies_about_its_address_is_refused(tmp_path: Path, keystore: Path) -> None:
    doc = json.loads(keystore.read_text())
    doc["address"] = "00" * 19 + "01"
    liar = tmp_path / "liar.json"
    liar.write_text(json.dumps(doc))
    with pytest.raises(KeystoreError, match="says it holds"):
        load_keystore(liar, password_file(tmp_path), environ={})


def test_import_copies_a_keystore_that_opens_and_never_overwrites(tmp_path: Path, keystore: Path) -> None:
    target = tmp_path / "imported"
    entry = import_keystore(keystore, target, password_file(tmp_path))
    assert entry.path.read_bytes() == keystore.read_bytes() and entry.address == ADDRESS
    with pytest.raises(KeystoreError, match="already exists"):
        import_keystore(keystore, target, password_file(tmp_path))
    with pytest.raises(WrongPassword):
        import_keystore(keystore, tmp_path / "elsewhere", password_file(tmp_path, "wrong\n"))
    assert not (tmp_path / "elsewhere").exists()


def test_list_shows_full_addresses_and_skips_other_files(tmp_path: Path, keystore: Path) -> None:
    other = new_keystore(keystore.parent, "pw", **CHEAP)
    (keystore.parent / "notes.txt").write_text("not a keystore")
    (keystore.parent / "broken.json").write_text("{")
    listed = list_keystores(keystore.parent)
    assert {(e.address, e.path) for e in listed} == {(ADDRESS, keystore), (other.address, other.path)}
    assert all(len(e.address) == 42 for e in listed)
    assert list_keystores(tmp_path / "none") == []


def test_bad_private_keys_are_refused_without_echoing_them() -> None:
    assert parse_private_key("0x" + KEY.hex()) == KEY and parse_private_key(KEY.hex() + "\n") == KEY
    secret = KEY.hex()[:-2]
    for text in (secret, "0x" + "00" * 32, "ff" * 32, "zz" * 32):
        with pytest.raises(KeystoreError) as raised:
            parse_private_key(text)
        assert secret not in str(raised.value)
