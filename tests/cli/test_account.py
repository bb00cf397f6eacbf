"""`unchained account new|import|list`: keystores made, imported and listed from the command line,
the password given by a file or typed at a real terminal (a pty)."""

from __future__ import annotations

import json
import os
import pty
import select
import sys
import time
from pathlib import Path

import pytest
from eth_account import Account
from typer.testing import CliRunner

from client.keystore import PASSWORD_FILE_ENV, load_keystore
from unchained_cli.main import app

KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"  # anvil account 2: public
ADDRESS = Account.from_key(KEY).address
runner = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env={PASSWORD_FILE_ENV: "", **(env or {})}, terminal_width=80)
    return result.exit_code, result.output


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_new_then_list_shows_the_full_address_and_path(tmp_path: Path) -> None:
    keys, password = tmp_path / "keys", write(tmp_path / "pw", "a long passphrase\n")
    code, out = invoke("account", "new", "--dir", str(keys), "--password-file", str(password))
    assert code == 0, out
    address = out.split("address")[1].split()[0]
    path = keys / f"{address}.json"
    assert f"keystore {path}" in out and path.is_file()
    assert load_keystore(path, password).address == address
    code, out = invoke("account", "list", "--dir", str(keys))
    assert code == 0 and out.strip() == f"{address}  {path}"  # 42 characters, never cut at 80 columns
    code, out = invoke("account", "list", "--dir", str(keys), "-o", "json")
    assert code == 0 and json.loads(out) == [{"address": address, "path": str(path)}], out
    code, out = invoke("account", "list", "--dir", str(tmp_path / "none"), "-o", "json")
    assert code == 0 and json.loads(out) == [], out


def test_import_a_key_file_and_an_existing_keystore(tmp_path: Path) -> None:
    keys, password = tmp_path / "keys", write(tmp_path / "pw", "pw one\n")
    key_file = write(tmp_path / "key.txt", KEY + "\n")
    code, out = invoke("account", "import", "--key-file", str(key_file), "--dir", str(keys),
                       env={PASSWORD_FILE_ENV: str(password)})  # the variable names the file
    assert code == 0, out
    assert f"address  {ADDRESS}" in out and load_keystore(keys / f"{ADDRESS}.json", password).key.hex() == KEY[2:]
    code, out = invoke("account", "import", "--key-file", str(key_file), "--dir", str(keys),
                       "--password-file", str(password))
    assert code == 1 and "already exists; nothing was overwritten" in out

    other = tmp_path / "other"
    code, out = invoke("account", "import", "--keystore", str(keys / f"{ADDRESS}.json"), "--dir", str(other),
                       "--password-file", str(password))
    assert code == 0 and (other / f"{ADDRESS}.json").read_bytes() == (keys / f"{ADDRESS}.json").read_bytes()


@pytest.mark.parametrize("args, message", [
    (["account", "import", "--key-file", "{bad_key}"], "the private key must be 64 hex digits"),
    (["account", "import", "--keystore", "{keystore}", "--password-file", "{wrong}"],
     "wrong password for keystore {keystore}"),
    (["account", "import", "--keystore", "{bad_key}", "--password-file", "{wrong}"], "not JSON"),
    (["account", "new"], "pass --password-file FILE or set UNCHAINED_PASSWORD_FILE=FILE"),
    (["account", "new", "--password-file", "{empty}"], "is empty"),
    (["account", "import", "--key-file", "{bad_key}", "--keystore", "{keystore}"], "not both"),
    (["account", "import"], "pass --key-file FILE"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    files = {"bad_key": write(tmp_path / "bad.txt", "0x1234\n"), "wrong": write(tmp_path / "wrong", "nope\n"),
             "empty": write(tmp_path / "empty", ""),
             "keystore": write(tmp_path / "k.json", json.dumps(Account.encrypt(KEY, "right", iterations=1 << 10)))}
    keys = tmp_path / "keys"
    code, out = invoke(*[a.format(**files) for a in args], "--dir", str(keys))
    assert code != 0 and message.format(**files) in " ".join(out.split()), out
    assert "Traceback" not in out and not keys.exists()


def _drive_terminal(argv: list[str], answers: list[str], timeout: float = 60.0) -> tuple[int, str]:
    """Runs `argv` on a new pseudo-terminal (its controlling tty), typing each answer after a prompt."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, with the pty as its terminal
        os.execve(argv[0], argv, {k: v for k, v in os.environ.items() if k != PASSWORD_FILE_ENV})
    output, pending, deadline, mark = b"", list(answers), time.monotonic() + timeout, 0
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
            if pending and output[mark:].rstrip().endswith(b":"):  # a new prompt since the last answer
                os.write(fd, pending.pop(0).encode() + b"\n")
                mark = len(output)
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), output.decode(errors="replace")


def test_new_asks_twice_on_the_terminal_and_never_echoes(tmp_path: Path) -> None:
    cli = [sys.executable, "-c", "from unchained_cli.account import account_app; account_app()"]  # light imports
    keys = tmp_path / "keys"
    code, out = _drive_terminal([*cli, "new", "--dir", str(keys)], ["typed secret", "typed secret"])
    assert code == 0, out
    assert "typed secret" not in out
    [path] = keys.iterdir()
    assert f"keystore {path}" in out.replace("\r", "")
    assert load_keystore(path, write(tmp_path / "pw", "typed secret\n")).address == path.stem

    code, out = _drive_terminal([*cli, "new", "--dir", str(keys)], ["one", "two"])
    assert code == 1 and "the two passwords for the new keystore differ" in out
    assert len(list(keys.iterdir())) == 1
