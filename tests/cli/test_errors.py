"""The CLI's one error boundary: every command given bad input (a node, backend or broker that is
down or malformed, impossible numbers, missing files, a contract that refuses) says in one line
what to fix, with exit status 1 or 2, and never prints a traceback unless asked with --debug.

Commands run in this process through the same boundary `unchained` uses (`run_guarded`), on a
real anvil with the contracts deployed; one case runs the installed `unchained` script itself.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from tests.support.chain import SharedChains
from client.ports import free_port
from unchained_cli.errors import run_guarded
from devtools.market import KEYSTORE_PASSWORD, write_keystore
from devtools.session import ChainSession

UNCHAINED = str(Path(sys.executable).with_name("unchained"))
NOBODY = "0x" + "42" * 20


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory, chains: SharedChains) -> dict[str, str]:
    root = tmp_path_factory.mktemp("errors")
    chain = chains.get()
    keystore, _address = write_keystore(root / "keys", 3)
    password_file = root / "password"
    password_file.write_text(KEYSTORE_PASSWORD + "\n")
    inputs = root / "inputs"
    inputs.mkdir()
    (inputs / "a.bin").write_bytes(b"x")
    # A job of somebody else (renter 5, provider 1): the keystore's account 3 may not challenge it.
    session = ChainSession.connect(chain.rpc_url, chain.deployment)
    escrow = session.contract("JobEscrow")
    session.send(session.contract("Staking").functions.stake(), session.accounts[1], value=10**18)
    session.send(session.contract("ProviderRegistry").functions.register(
        b"CPU".ljust(32, b"\0"), [b"\x01" * 32], 10**16, 10**12, ""), session.accounts[1])
    session.send(escrow.functions.createJob(session.accounts[1], b"\x01" * 32, 10**15, session.now() + 3600),
                 session.accounts[5], value=10**15)
    return {"job": str(escrow.functions.jobCount().call()),"rpc": chain.rpc_url, "deployment": str(chain.deployment_file), "keystore": str(keystore),
            "password_file": str(password_file), "inputs": str(inputs), "down": f"http://127.0.0.1:{free_port()}",
            "root": str(root)}


@pytest.fixture(autouse=True)
def _private_env(monkeypatch: pytest.MonkeyPatch, net: dict[str, str]) -> None:
    # Commands export their flags into os.environ (the provider's settings): keep each case's own.
    monkeypatch.setattr(os, "environ", dict(os.environ))
    os.environ.update({"UNCHAINED_PASSWORD_FILE": net["password_file"],
                       "HOME": net["root"], "COLUMNS": "200"})
    # Services reconfigure logging onto pytest's captured streams, closed after each test.
    monkeypatch.setattr(logging, "raiseExceptions", False)
    os.environ.pop("UNCHAINED_CONFIG", None)
    os.environ.pop("UNCHAINED_DEBUG", None)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from unchained_cli.errors import set_debug
    from unchained_cli.main import app

    set_debug(False)
    code = run_guarded(typer.main.get_command(app), list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def assert_explained(code: int, output: str, *phrases: str, exit_code: int | None = None) -> None:
    assert "Traceback" not in output and 'File "' not in output, output
    assert code in (1, 2) if exit_code is None else code == exit_code, (code, output)
    for phrase in phrases:
        assert phrase.lower() in output.lower(), (phrase, output)


# -- endpoints that are down or malformed ------------------------------------------------------


def test_job_status_and_result_with_the_backend_down(capsys, net) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, "job", "status", "1", "--backend", net["down"])
    assert_explained(code, out, net["down"], "refused the connection", "--backend", exit_code=1)
    assert len([line for line in out.splitlines() if line.strip()]) == 1, out
    code, out = run(capsys, "job", "result", "1", "--keystore", net["keystore"], "--backend", net["down"])
    assert_explained(code, out, net["down"], "--backend", exit_code=1)
    code, out = run(capsys, "model", "list", "--backend", net["down"])
    assert_explained(code, out, "--backend", exit_code=1)


def test_a_backend_url_that_is_not_one(capsys) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, "job", "status", "1", "--backend", "localhost:8000")
    assert_explained(code, out, "--backend", "http://")


def test_verifier_run_with_the_rpc_down(capsys, net) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, "verifier", "run", "--rpc", net["down"], "--keystore", net["keystore"],
                    "--broker", "redis://127.0.0.1:6379/0", "--metrics-port", "0")
    assert_explained(code, out, "no JSON-RPC node answers", net["down"], "--rpc", exit_code=1)


def test_backend_serve_with_the_rpc_down_stops_at_once(capsys, net) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, "backend", "serve", "--rpc", net["down"], "--data-dir", net["root"] + "/b")
    assert_explained(code, out, "no JSON-RPC node answers", "--rpc", exit_code=1)


def test_provider_run_with_the_rpc_down(capsys, net) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, "provider", "run", "--rpc", net["down"], "--keystore", net["keystore"])
    assert_explained(code, out, "no JSON-RPC node answers", "--rpc", exit_code=1)


@pytest.mark.parametrize("command", [
    ["provider", "run", "--keystore", "{keystore}", "--rpc", "{rpc}", "--deployment", "{deployment}"],
    ["verifier", "run", "--keystore", "{keystore}", "--rpc", "{rpc}", "--deployment", "{deployment}",
     "--metrics-port", "0"],
    ["backend", "serve", "--rpc", "{rpc}", "--deployment", "{deployment}"],
    ["up"],
])
def test_a_malformed_broker_url_is_refused_before_anything_is_signed(capsys, net, command) -> None:  # type: ignore[no-untyped-def]
    args = [a.format(**net) for a in command] + ["--broker", "redis://[bad"]
    code, out = run(capsys, *args)
    assert_explained(code, out, "--broker", "redis://[bad")
    if command[0] == "provider":  # nothing was staked or registered
        from web3 import Web3

        from devtools.market import dev_account

        web3 = Web3(Web3.HTTPProvider(net["rpc"]))
        assert web3.eth.get_transaction_count(dev_account(3).address) == 0


def test_an_unreachable_broker_is_refused_before_the_provider_stakes(capsys, net) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, "provider", "run", "--keystore", net["keystore"], "--rpc", net["rpc"],
                    "--deployment", net["deployment"], "--broker", f"redis://127.0.0.1:{free_port()}/0")
    assert_explained(code, out, "broker", "--broker", exit_code=1)


# -- impossible numbers and what the chain refuses ----------------------------------------------


@pytest.fixture
def ssh_key(tmp_path: Path) -> str:
    """A renter's SSH public key (`lease start` checks it before paying)."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True)
    return str(tmp_path / "id.pub")


def test_lease_start_with_more_gpus_than_the_provider_has(capsys, net, ssh_key) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, "lease", "start", "--provider", NOBODY, "--gpus", "1000000", "--hours", "1",
                    "--ssh-key", ssh_key, "--keystore", net["keystore"], "--rpc", net["rpc"],
                    "--deployment", net["deployment"])
    assert_explained(code, out, "--gpus", "GPU(s) free", exit_code=1)


@pytest.mark.parametrize("args, flag", [
    (["lease", "start", "--provider", NOBODY, "--gpus", "1", "--hours", "1e9"], "--hours"),
    (["lease", "start", "--provider", NOBODY, "--gpus", "0", "--hours", "1"], "--gpus"),
    (["job", "submit", "--model", "0x" + "11" * 32, "--inputs", "{inputs}", "--max-price", "-1"], "--max-price"),
    (["job", "submit", "--model", "0x" + "11" * 32, "--inputs", "{inputs}", "--max-price", "lots"], "--max-price"),
    (["job", "status", "-1"], "job_id"),
])
def test_bad_numbers_are_refused_with_the_flag_named(capsys, net, args, flag) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, *[a.format(**net) for a in args], "--keystore", net["keystore"]
                    ) if args[0] != "job" or args[1] != "status" else run(capsys, *args)
    assert_explained(code, out, flag, exit_code=2)


def test_lease_of_an_address_that_is_not_one(capsys, net, ssh_key) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, "lease", "start", "--provider", "0x1234", "--gpus", "1", "--hours", "1",
                    "--ssh-key", ssh_key, "--keystore", net["keystore"], "--rpc", net["rpc"],
                    "--deployment", net["deployment"])
    assert_explained(code, out, "--provider", "not an address", exit_code=1)


def test_a_contract_revert_is_shown_as_what_it_means(capsys, net) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, "job", "challenge", net["job"], "--keystore", net["keystore"], "--rpc", net["rpc"],
                    "--deployment", net["deployment"])
    # Decoded against the contracts' ABIs (ChallengeNotStakedVerifier(0x..., 0, 10**18)), said as a sentence.
    assert_explained(code, out, "not your job: only its renter, or a verifier with at least 1 ETH staked",
                     "nothing was sent", exit_code=1)
    assert "ChallengeNotStakedVerifier" not in out


def test_a_job_that_does_not_exist_is_named(capsys, net) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, "job", "challenge", "999", "--keystore", net["keystore"], "--rpc", net["rpc"],
                    "--deployment", net["deployment"])
    assert_explained(code, out, "job 999 does not exist", "--deployment", exit_code=1)
    assert "unexpected" not in out


def test_insufficient_funds_say_so(capsys, net) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, "job", "challenge", net["job"], "--bond", "1000000", "--keystore", net["keystore"],
                    "--rpc", net["rpc"], "--deployment", net["deployment"])
    assert_explained(code, out, "insufficient funds", exit_code=1)


# -- files and configuration --------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["model", "push", "/no/such/model.pt", "--keystore", "{keystore}"],
    ["job", "submit", "--model", "0x" + "11" * 32, "--inputs", "/no/such/dir", "--max-price", "1",
     "--keystore", "{keystore}"],
    ["job", "result", "1", "--keystore", "/no/such/keystore.json"],
    ["--config", "/no/such/config.toml", "job", "status", "1"],
])
def test_missing_files_are_named(capsys, net, args) -> None:  # type: ignore[no-untyped-def]
    code, out = run(capsys, *[a.format(**net) for a in args])
    assert_explained(code, out, "/no/such/", exit_code=2)


def test_a_config_key_no_command_has_is_refused(capsys, net, tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "config.toml"
    config.write_text('rpcc = "http://127.0.0.1:8545"\n')
    code, out = run(capsys, "--config", str(config), "job", "status", "1")
    assert_explained(code, out, "rpcc", str(config), exit_code=2)
    config.write_text('rpc = "http://127.0.0.1:8545"\n["job stauts"]\nbackend = "x"\n')
    code, out = run(capsys, "--config", str(config), "job", "status", "1")
    assert_explained(code, out, "job stauts", exit_code=2)
    config.write_text("rpc = \n")
    code, out = run(capsys, "--config", str(config), "job", "status", "1")
    assert_explained(code, out, "not valid TOML", exit_code=2)


def test_other_commands_with_bad_input(capsys, net) -> None:  # type: ignore[no-untyped-def]
    for args, phrase in ((["deploy", "--rpc", net["down"]], "JSON-RPC"),
                         (["pog", "run", "--n", "100", "--device", "cpu"], "64"),
                         (["bench", "--only", "nonsense"], "nonsense"),
                         (["up", "--port", "70000"], "--port"),
                         (["provider", "leave", "--rpc", net["down"], "--keystore", net["keystore"]], "--rpc"),
                         (["lease", "stop", "1", "--keystore", net["keystore"], "--rpc", net["down"]], "--rpc")):
        code, out = run(capsys, *args)
        assert_explained(code, out, phrase)


# -- the installed command and --debug ----------------------------------------------------------


def test_the_unchained_script_prints_one_line_and_a_traceback_only_with_debug(net) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "COLUMNS": "200"}
    plain = subprocess.run([UNCHAINED, "job", "status", "7", "--backend", net["down"]], capture_output=True,
                           text=True, env=env, timeout=120)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr + plain.stdout
    assert plain.stderr.strip().startswith("error: ") and len(plain.stderr.strip().splitlines()) == 1, plain.stderr
    debug = subprocess.run([UNCHAINED, "--debug", "job", "status", "7", "--backend", net["down"]],
                           capture_output=True, text=True, env=env, timeout=120)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "ConnectError" in debug.stderr


def test_a_revert_reaching_the_boundary_is_decoded_and_said() -> None:
    from web3 import Web3
    from web3.exceptions import ContractCustomError

    from unchained_cli.errors import explain

    data = "0x" + Web3.keccak(text="ChallengeBadK(uint256)")[:4].hex().removeprefix("0x") + "00" * 31 + "05"
    wrapped = RuntimeError("sending failed")
    wrapped.__cause__ = ContractCustomError(data, data=data)
    assert explain(wrapped).message == "the contract refused: --k 5 is out of range: ask for between 1 and 64 items"
    assert explain(ContractCustomError("0xdeadbeef", data="0xdeadbeef")).message.endswith("unknown revert 0xdeadbeef")
