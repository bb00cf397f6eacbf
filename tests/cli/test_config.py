"""One configuration story: a TOML file whose keys mirror the flags, per command or group tables,
flag > environment variable > file > default; the backend's sign-in URL and data directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer

from backend.settings import Settings
from client.ports import free_port
from unchained_cli.config import default_map
from unchained_cli.errors import BadOption, run_guarded


def _tree():  # type: ignore[no-untyped-def]
    from unchained_cli.main import app

    return typer.main.get_command(app)


def test_top_level_keys_reach_every_command_with_that_flag_and_tables_win() -> None:
    doc = {"rpc": "http://node:8545", "max-price": 0.5, "backend": "http://api:8000",
           "job": {"backend": "http://jobs:8000"}, "backend serve": {"port": 8001, "database": "sqlite:////x.db"},
           "verifier run": {"pog_n": 256}}
    dm = default_map(_tree(), doc)
    assert dm["job"]["submit"]["rpc"] == "http://node:8545" and dm["lease"]["start"]["rpc"] == "http://node:8545"
    assert dm["backend"]["serve"]["rpc"] == "http://node:8545" and dm["verifier"]["run"]["rpc"] == "http://node:8545"
    assert dm["job"]["submit"]["max_price"] == 0.5
    assert dm["job"]["status"]["backend"] == "http://jobs:8000"  # the group's table wins over the top level
    assert dm["model"]["list"]["backend"] == "http://api:8000"
    assert dm["backend"]["serve"]["port"] == 8001 and dm["verifier"]["run"]["pog_n"] == 256
    assert "port" not in dm.get("up", {}) and "port" not in dm["job"]["submit"]  # a table stays in its command


@pytest.mark.parametrize("doc, named", [({"rpcc": "x"}, "rpcc"), ({"job": {"port": 1}}, "port"),
                                        ({"jobs": {"rpc": "x"}}, "jobs")])
def test_a_key_or_table_no_command_has_is_refused_by_name(doc, named) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BadOption, match=named):
        default_map(_tree(), doc)


def test_flag_wins_over_environment_which_wins_over_the_file(tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(os, "environ", dict(os.environ))
    from_file, from_env, from_flag = (f"http://127.0.0.1:{free_port()}" for _ in range(3))
    config = tmp_path / "config.toml"
    config.write_text(f'backend = "{from_file}"\n')

    def said(*args: str) -> str:
        assert run_guarded(_tree(), ["--config", str(config), "job", "status", "1", *args]) == 1
        return capsys.readouterr().err

    assert from_file in said()
    os.environ["UNCHAINED_BACKEND_URL"] = from_env
    assert from_env in said()
    assert from_flag in said("--backend", from_flag)
    os.environ.pop("UNCHAINED_BACKEND_URL")
    os.environ["UNCHAINED_CONFIG"] = str(config)  # the file named by the variable, without --config
    assert run_guarded(_tree(), ["job", "status", "1"]) == 1 and from_file in capsys.readouterr().err


def test_the_backend_signs_in_at_the_address_it_listens_on_unless_told() -> None:
    settings = Settings(data_dir=Path("/tmp/x")).with_listen_address("127.0.0.1", 8123)
    assert (settings.base_url, settings.siwe_domain, settings.siwe_uri) == (
        "http://127.0.0.1:8123", "127.0.0.1:8123", "http://127.0.0.1:8123")
    behind = Settings(data_dir=Path("/tmp/x"), public_url="https://market.example").with_listen_address("0.0.0.0", 80)
    assert (behind.base_url, behind.siwe_domain) == ("https://market.example", "market.example")


def test_the_backend_database_lives_per_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("UNCHAINED_DATA_DIR", str(tmp_path))
    settings = Settings().for_network(31337)
    assert settings.db_url == f"sqlite:///{tmp_path}/31337/backend/backend.db"
    assert Settings().for_network(1).blob_dir == tmp_path / "1" / "backend" / "blobs"
    assert Settings(data_dir=tmp_path / "mine").for_network(31337).data_dir == tmp_path / "mine"
    with pytest.raises(ValueError, match="network"):
        Settings().db_url  # noqa: B018  no directory shared between networks by accident


def test_backend_serve_on_any_port_signs_users_in_without_a_public_url(tmp_path: Path, capsys, monkeypatch, chains) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    import httpx

    import torch

    from tests.tiny_models import Tiny
    from devtools.market import KEYSTORE_PASSWORD, wait_for, write_keystore

    monkeypatch.setattr(os, "environ", dict(os.environ))
    for name in ("UNCHAINED_BACKEND_PUBLIC_URL", "UNCHAINED_BACKEND_SIWE_DOMAIN", "UNCHAINED_BACKEND_SIWE_URI"):
        os.environ.pop(name, None)
    port = free_port()
    shared = chains.get()
    chain, deployment = shared.local, shared.deployment_file
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("unchained")), "backend", "serve", "--port", str(port),
         "--rpc", chain.rpc_url, "--deployment", str(deployment), "--data-dir", str(tmp_path / "backend"),
         "--broker", f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "HOME": str(tmp_path)})
    try:
        url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            assert server.poll() is None
            try:
                return httpx.get(url + "/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        assert wait_for(healthy, 90, 0.3)
        keystore, _ = write_keystore(tmp_path / "keys", 3)
        model = tmp_path / "m.pt"
        torch.jit.save(torch.jit.script(Tiny()), str(model))  # the hub loads what it accepts
        os.environ["UNCHAINED_PASSWORD_FILE"] = str(tmp_path / "pw")
        (tmp_path / "pw").write_text(KEYSTORE_PASSWORD + "\n")
        code = run_guarded(_tree(), ["model", "push", str(model), "--keystore", str(keystore), "--backend", url])
        out = capsys.readouterr()
        assert code == 0 and "model 0x" in out.out, out
    finally:
        server.terminate()
        server.wait(timeout=30)
