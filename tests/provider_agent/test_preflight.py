"""A provider checks its broker (parse, connect, PING) and its backend (GET /health) before it
opens its key, stakes or registers: a malformed or dead endpoint is one line, and nothing is
sent on-chain."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from provider_agent.preflight import PreflightFailed, check_backend, check_broker
from tests.support.provider_market import PASSWORD
from client.ports import free_port
from unchained_cli.main import app


@pytest.fixture
def clean_env():
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)
    from provider_agent.settings import get_settings

    get_settings.cache_clear()


@pytest.mark.parametrize("url,words", [
    ("redis://[bad", "is not a usable broker URL"),
    ("redis://127.0.0.1:notaport/0", "is not a usable broker URL"),
    ("amqp://127.0.0.1:5672//", "is not a usable broker URL"),
])
def test_malformed_broker_urls_fail_in_one_line(url, words):
    with pytest.raises(PreflightFailed) as caught:
        check_broker(url)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_dead_broker_and_a_dead_backend_are_named(redis_url):
    check_broker(redis_url)  # a live one passes
    dead = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(PreflightFailed, match="does not answer PING"):
        check_broker(dead, timeout_s=2)
    with pytest.raises(PreflightFailed, match="does not answer GET /health"):
        check_backend(f"http://127.0.0.1:{free_port()}", timeout_s=2)


@pytest.mark.parametrize("broker,backend,words", [
    ("redis://[bad", None, "is not a usable broker URL"),
    (None, "dead", "refused the connection: is the backend running"),  # the CLI boundary names the cause
])
def test_provider_run_checks_before_it_stakes(market, keystore, redis_url, tmp_path, clean_env, broker, backend, words):
    """Attack on the renter's trust: a provider that cannot take jobs must not stake, register
    and sit listed as active (it used to stake 1 ETH, register, then crash with a traceback)."""
    (tmp_path / "password").write_text(PASSWORD + "\n")
    os.environ["UNCHAINED_PASSWORD_FILE"] = str(tmp_path / "password")
    os.environ["UNCHAINED_PROVIDER_DEPLOYMENTS_DIR"] = str(market.deployments_dir)
    args = ["run", "--rpc", market.chain.rpc_url, "--keystore", str(keystore), "--broker", broker or redis_url,
            "--data-dir", str(tmp_path / "data"), "--no-mining"]
    if backend:
        args += ["--backend", f"http://127.0.0.1:{free_port()}"]
    else:
        args += ["--content-dir", str(tmp_path)]
    result = CliRunner().invoke(app, ["provider", *args], terminal_width=300)  # through the CLI's one boundary
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())  # rich wraps at 80 columns
    assert words in said and "Traceback" not in said and len(said) < 300, result.output
    s = market.session
    assert not s.contract("ProviderRegistry").functions.isRegistered(market.provider).call()
    assert s.contract("Staking").functions.stakeOf(market.provider).call() == 0
