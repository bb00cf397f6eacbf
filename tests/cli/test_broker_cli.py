"""`unchained broker grant|revoke` against a private redis-server: the printed URL works, with
rights on the party's own keys only, until the user is revoked."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis
from typer.testing import CliRunner

from protocol.broker import provider_keyprefix
from client.ports import free_port
from unchained_cli.main import app

PROVIDER = "0x" + "ab" * 20


@pytest.fixture
def admin_url(tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


def test_grant_prints_a_url_for_the_providers_own_keys_and_revoke_removes_it(admin_url: str) -> None:
    runner = CliRunner()
    granted = runner.invoke(app, ["broker", "grant", "--provider", PROVIDER, "--admin-url", admin_url])
    assert granted.exit_code == 0, granted.output
    url = granted.output.strip()
    assert url.startswith(f"redis://provider-{PROVIDER}:") and url.endswith(admin_url.split("//")[1].split("@")[-1])
    client = redis.Redis.from_url(url)
    client.set(provider_keyprefix(PROVIDER) + "mine", "1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.set("provider.0x" + "cd" * 20 + ":theirs", "1")
    revoked = runner.invoke(app, ["broker", "revoke", "--provider", PROVIDER, "--admin-url", admin_url])
    assert revoked.exit_code == 0 and "revoked" in revoked.output
    with pytest.raises(redis.exceptions.ConnectionError):  # its connection was closed, and it cannot log in
        client.ping()
    again = runner.invoke(app, ["broker", "revoke", "--provider", PROVIDER, "--admin-url", admin_url])
    assert again.exit_code == 0 and "no such user" in again.output


@pytest.mark.parametrize("args, words", [
    (["--provider", PROVIDER, "--backend"], "exactly one of"),
    ([], "exactly one of"),
    (["--provider", "0x12"], "not an address"),
])
def test_grant_refuses_an_unclear_party(admin_url: str, args: list[str], words: str) -> None:
    result = CliRunner().invoke(app, ["broker", "grant", "--admin-url", admin_url, *args], terminal_width=200)
    assert result.exit_code != 0 and words in result.output, result.output


def test_grant_on_a_sqlite_broker_says_users_need_redis() -> None:
    result = CliRunner().invoke(app, ["broker", "grant", "--backend", "--admin-url", "sqla+sqlite:///x.sqlite"],
                                terminal_width=200)
    assert result.exit_code == 1 and "users exist on a Redis broker only" in result.output, result.output
