"""`unchained up`: a local network that stays up for manual use, until Ctrl-C or SIGTERM.

anvil with a block time (an empty block every --block-time seconds, transactions mined at once),
the contract set deployed, a Celery broker (a private redis-server when one is installed, else
the SQLite transport) and the backend: the operator's side of `devtools.market`, started by
the same code the demo uses. Renters, providers and verifiers are left to people, each in their
own terminal; `up` prints what they run and writes everything they need under one per-network
directory (~/.unchained/31337 by default):

- config.toml: the endpoints (rpc, backend, broker, deployment) for `UNCHAINED_CONFIG`;
- deployments/31337.json, backend/ (database and blobs), broker files, logs/;
- dev-keys/account-N.key: anvil's public development keys, for `unchained account import`;
- example/: a small TorchScript model and input items for a first job.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console

from unchained_cli.deploy import DAY, DeployParams
from unchained_cli.errors import BadOption, CliError

if TYPE_CHECKING:
    from devtools.market import Broker, LocalMarket

console = Console()
CHAIN_ID = 31337
# Windows a person can act inside while typing commands (a challenge is opened minutes after a
# result is committed), each shorter than the unbonding delay so that stake stays slashable.
LOCAL_PARAMS = DeployParams(challenge_window=10 * 60, pog_commit_window=2 * 60, root_challenge_period=DAY,
                            response_window=5 * 60, fraud_window=5 * 60, vote_window=10 * 60,
                            escalation_window=5 * 60, unbonding_delay=2 * DAY,  # > the PoG windows (checked)
                            max_job_duration=DAY)  # + the challenge window <= the unbonding delay (checked)
# Settings of a verifier on this network: rounds sized for a CPU, the first one within seconds.
# The development accounts the printed walkthrough gives each party.
PROVIDER_ACCOUNT, VERIFIER_ACCOUNT, RENTER_ACCOUNT = 1, 2, 3
LOCAL_VERIFIER = {"pog_n": 256, "pog_dtype": "fp32", "pog_jitter": 5.0, "pog_interval": 600.0}
# A backend that exits is started again on the same chain, broker and database (the running parties
# follow this chain: a new `up` would be a new one). One that exits more often than this within
# the window has a cause a restart does not fix.
BACKEND_RESTARTS = 3
RESTART_WINDOW_S = 600.0


def default_data_dir() -> Path:
    return Path.home() / ".unchained" / str(CHAIN_ID)


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _toml(value: object) -> str:
    return json.dumps(str(value)) if isinstance(value, Path) else json.dumps(value)


def write_config(path: Path, rpc: str, backend: str, deployment: Path, broker: Broker) -> Path:
    """The network's endpoints as a config file every other terminal points UNCHAINED_CONFIG at.

    On `up`'s own Redis every party connects as its own ACL user: the provider's and verifier's
    runs get the users granted to development accounts #1 and #2 (the walkthrough's), and the
    admin URL goes only to `unchained broker grant|revoke`, for parties with other accounts."""
    lines = ["# Written by `unchained up`: export UNCHAINED_CONFIG=" + str(path),
             f"rpc = {_toml(rpc)}", f"backend = {_toml(backend)}", f"deployment = {_toml(deployment)}"]
    provider_url = broker.url_for("provider", dev_address(PROVIDER_ACCOUNT))
    verifier_url = broker.url_for("verifier", dev_address(VERIFIER_ACCOUNT))
    if provider_url == broker.url:  # no users on this broker (SQLite, or a URL given with --broker)
        lines += [f"broker = {_toml(broker.url)}", "", '["verifier run"]']
    else:
        lines += ["", '["broker"]', f"admin_url = {_toml(broker.url)}",
                  "", '["provider run"]', f"broker = {_toml(provider_url)}",
                  "", '["verifier run"]', f"broker = {_toml(verifier_url)}"]
    lines += [f"{key} = {_toml(value)}" for key, value in LOCAL_VERIFIER.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def dev_address(index: int) -> str:
    from devtools.market import dev_account

    return dev_account(index).address


def write_dev_keys(directory: Path, count: int) -> list[tuple[int, str, Path]]:
    """anvil's development keys as files (public keys: for local use only)."""
    from devtools.market import dev_account

    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for index in range(count):
        account = dev_account(index)
        path = directory / f"account-{index}.key"
        path.write_text(account.key.hex() + "\n")
        path.chmod(0o600)
        rows.append((index, account.address, path))
    return rows


def write_example(directory: Path) -> tuple[Path, Path]:
    """The demo's TorchScript model and three input items, for a first job by hand."""
    from devtools.demo import demo_model, job_inputs

    inputs = directory / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    model = directory / "model.pt"
    model.write_bytes(demo_model())
    for i, item in enumerate(job_inputs(seed=1)[:3]):
        (inputs / f"item-{i}.bin").write_bytes(item)
    return model, inputs


def up(
    port: Annotated[int, typer.Option(min=1, max=65535, help="JSON-RPC port of anvil.")] = 8545,
    backend_port: Annotated[int, typer.Option(min=1, max=65535, help="Port of the backend API.")] = 8000,
    block_time: Annotated[float, typer.Option(min=0.1, max=60, help="Seconds per empty block when idle "
                                                                    "(transactions are mined at once).")] = 1.0,
    broker: Annotated[Optional[str], typer.Option(help="Celery broker URL; default: a private redis-server "
                                                       "if installed, else SQLite in the data directory.")] = None,
    data_dir: Annotated[Optional[Path], typer.Option(file_okay=False, help="Where the network keeps its files; "
                                                     "default: ~/.unchained/31337.")] = None,
    accounts: Annotated[int, typer.Option(min=4, max=100, help="Funded development accounts.")] = 10,
) -> None:
    """Start a local network for manual use: chain, contracts, broker and backend; print what to run next."""
    from protocol.tasks import BadBrokerUrl, result_backend_url
    from devtools.market import LocalMarket, MarketPlan

    if broker:
        try:
            result_backend_url(broker)
        except (BadBrokerUrl, ValueError) as exc:
            raise BadOption("--broker", str(exc)) from exc
    for flag, value in (("--port", port), ("--backend-port", backend_port)):
        if not _port_free(value):
            raise BadOption(flag, f"port {value} is in use on 127.0.0.1 (another `unchained up` or anvil?): "
                                  f"stop it or pick another port")
    root = (data_dir or default_data_dir()).expanduser()
    plan = MarketPlan(providers=(), verifiers=(), renters=(), params=LOCAL_PARAMS, block_time=block_time,
                      broker_url=broker)
    market = LocalMarket(plan, root, rpc_port=port, backend_port=backend_port, accounts=accounts)

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    try:
        market.start_infrastructure(lambda line: console.print(f"[green]up[/green] {line}", soft_wrap=True))
        assert market.deployment_file is not None
        config = write_config(root / "config.toml", market.chain.rpc_url, market.backend_url, market.deployment_file,
                              market.broker)
        keys = write_dev_keys(root / "dev-keys", accounts)
        model, inputs = write_example(root / "example")
        _print_next(config, keys, model, inputs, market)
        restarts: deque[float] = deque()
        while True:
            keep_backend_up(market, restarts, lambda line: console.print(f"[yellow]up[/yellow] {line}", soft_wrap=True))
            if market.chain.process is None or market.chain.process.poll() is not None:
                raise CliError("anvil exited")
            time.sleep(0.5)
    except KeyboardInterrupt:
        console.print("stopping every process `unchained up` started")
    finally:
        market.stop()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    console.print(f"stopped; files and logs stay in {root}")


def keep_backend_up(market: LocalMarket, restarts: deque[float], say: Callable[[str], object]) -> None:
    """Starts the backend again if it exited (chain and broker stay up), at most BACKEND_RESTARTS
    times within RESTART_WINDOW_S (`restarts`: when the last ones were); past that, raises."""
    from devtools.market import MarketError

    service = market.services["backend"]
    if service.alive:
        return
    status = service.proc.returncode if service.proc is not None else None
    service.stop()  # whatever its process group left behind
    now = time.monotonic()
    while restarts and now - restarts[0] > RESTART_WINDOW_S:
        restarts.popleft()
    if len(restarts) >= BACKEND_RESTARTS:
        raise CliError(f"the backend exited {len(restarts) + 1} times within {RESTART_WINDOW_S / 60:g} min "
                       f"(last exit status {status}), so `up` stops; its log: {service.log_path}")
    restarts.append(now)
    say(f"the backend exited (status {status}); starting it again ({len(restarts)} of {BACKEND_RESTARTS} "
        f"restarts within {RESTART_WINDOW_S / 60:g} min), on the same chain and broker; its log: {service.log_path}")
    try:
        market.start_backend()
    except MarketError as exc:  # it exited or never answered: the next look counts another restart
        market.services["backend"].stop()
        say(f"the backend did not come back: {str(exc).splitlines()[0]}")
        return
    say(f"backend at {market.backend_url} again")


def _print_next(config: Path, keys: list[tuple[int, str, Path]], model: Path, inputs: Path,
                market: object) -> None:
    from devtools.market import LocalMarket

    assert isinstance(market, LocalMarket)
    users_note = ("  (its admin; each party gets its own user: config.toml, `unchained broker grant`)"
                  if market.broker.users and market.broker.server is not None else "")
    print(f"""
The network is up (chain id {CHAIN_ID}); Ctrl-C stops everything.
  RPC      {market.chain.rpc_url}  (a block every {market.plan.block_time:g} s)
  backend  {market.backend_url}  (API docs: {market.backend_url}/docs, dashboard: {market.backend_url}/)
  broker   {market.broker.url}{users_note}
  contracts {market.deployment_file}
  logs     {market.root / 'logs'}

Funded development accounts (10,000 ETH each; public keys, for this local network only):""")
    for index, address, path in keys:
        print(f"  #{index}  {address}  key file {path}")
    keystores = Path.home() / ".unchained" / "keystores"

    def party(role: str, index: int, then: str) -> str:
        _i, address, key = keys[index]
        return (f"  {role} (account #{index}):\n"
                f"    echo 'a password' > {role}.pw\n"
                f"    unchained account import --key-file {key} --password-file {role}.pw\n"
                f"    {then.format(ks=keystores / f'{address}.json', pw=f'{role}.pw')}\n")

    print("\nIn every other terminal first:\n"
          f"  export UNCHAINED_CONFIG={config}\n\n"
          "Then each party in its own terminal (README, \"Walkthrough\"):\n"
          + party("provider", PROVIDER_ACCOUNT, "unchained provider run --keystore {ks} --password-file {pw}")
          + party("verifier", VERIFIER_ACCOUNT, "unchained verifier run --keystore {ks} --password-file {pw}")
          + party("renter", RENTER_ACCOUNT, f"unchained job submit --model {model} --inputs {inputs} --max-price 0.01 "
                               "--keystore {ks} --password-file {pw}"), flush=True)
