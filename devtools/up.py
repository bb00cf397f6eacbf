"""`unchained up`: a local network that stays up for manual use, until Ctrl-C or SIGTERM.

anvil with a block time (an empty block every --block-time seconds, transactions mined at once),
the contract set deployed, a Celery broker (a private redis-server when one is installed, else
the SQLite transport) and the backend: the operator's side of `devtools.market`, started by
the same code the demo uses. Renters, providers and verifiers are left to people, each in their
own terminal; `up` prints what they run and writes everything they need under one per-network
directory (~/.unchained/31337 by default). A service that exits is started again on the same
port and data (`Supervised`), and a new `up` on the directory goes on with the chain it keeps
(`--fresh` starts a new one):

- config.toml: the endpoints (rpc, backend, broker, deployment) for `UNCHAINED_CONFIG`;
- chain/state.json (the chain, written every 2 s and at exit), deployments/31337.json, backend/
  (database and blobs), broker files, logs/;
- dev-keys/account-N.key: anvil's public development keys, for `unchained account import`;
- example/: a small TorchScript model and input items for a first job.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import tomllib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console

from client.ports import port_free
from unchained_cli.deploy import DAY, DeployParams
from unchained_cli.errors import BadOption, CliError

if TYPE_CHECKING:
    from devtools.market import Broker, LocalMarket, Service

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
# A service that exits is started again on the same port and data (the running parties follow this
# chain, broker and backend). One that exits more often than this within the window has a cause a
# restart does not fix.
RESTARTS = 3
RESTART_WINDOW_S = 600.0
FRESH_HINT = "`unchained up --fresh` starts a new chain (a new deployment, backend database and broker data)"


def default_data_dir() -> Path:
    return Path.home() / ".unchained" / str(CHAIN_ID)


def _toml(value: object) -> str:
    return json.dumps(str(value)) if isinstance(value, Path) else json.dumps(value)


def write_config(path: Path, rpc: str, backend: str, deployment: Path, broker: Broker) -> Path:
    """The network's endpoints as a config file every other terminal points UNCHAINED_CONFIG at.

    On `up`'s own Redis every party connects as its own ACL user: the provider's and verifier's
    runs get the users granted to development accounts #1 and #2 (the walkthrough's), and the
    admin URL goes only to `unchained broker grant|revoke`, for parties with other accounts. A
    party's URL from the file's previous version is kept while it still logs in (a new `up` on the
    directory: the same broker port and users), so running parties' configuration holds."""
    previous = _read_config(path)
    lines = ["# Written by `unchained up`: export UNCHAINED_CONFIG=" + str(path),
             f"rpc = {_toml(rpc)}", f"backend = {_toml(backend)}", f"deployment = {_toml(deployment)}"]
    provider_url = _kept_url(previous, "provider run", broker) or broker.url_for("provider", dev_address(PROVIDER_ACCOUNT))
    verifier_url = _kept_url(previous, "verifier run", broker) or broker.url_for("verifier", dev_address(VERIFIER_ACCOUNT))
    if provider_url == broker.url:  # no users on this broker (SQLite, or a URL given with --broker)
        lines += [f"broker = {_toml(broker.url)}", "", '["verifier run"]']
    else:
        lines += ["", '["broker"]', f"admin_url = {_toml(broker.url)}",
                  "", '["provider run"]', f"broker = {_toml(provider_url)}",
                  "", '["verifier run"]', f"broker = {_toml(verifier_url)}"]
    lines += [f"{key} = {_toml(value)}" for key, value in LOCAL_VERIFIER.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _read_config(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _kept_url(previous: dict[str, Any], table: str, broker: Broker) -> str | None:
    """The party's broker URL of the previous config, if it names this broker and still logs in."""
    import redis

    url = previous.get(table, {}).get("broker")
    if not isinstance(url, str) or broker.port is None or f"@127.0.0.1:{broker.port}/" not in url:
        return None
    try:
        with redis.Redis.from_url(url, socket_timeout=5) as client:
            client.ping()
    except redis.RedisError:
        return None
    return url


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
    fresh: Annotated[bool, typer.Option("--fresh", help="Start a new chain, removing the one the data directory "
                                                        "keeps (its deployment, backend database and broker "
                                                        "data); default: go on with it.")] = False,
) -> None:
    """Start a local network for manual use: chain, contracts, broker and backend; print what to run next."""
    from client.instance_lock import InstanceLock
    from protocol.tasks import BadBrokerUrl, result_backend_url
    from devtools.market import ChainNotResumable, LocalMarket, MarketPlan

    if broker:
        try:
            result_backend_url(broker)
        except (BadBrokerUrl, ValueError) as exc:
            raise BadOption("--broker", str(exc)) from exc
    for flag, value in (("--port", port), ("--backend-port", backend_port)):
        if not port_free(value):
            raise BadOption(flag, f"port {value} is in use on 127.0.0.1 (another `unchained up` or anvil?): "
                                  f"stop it or pick another port")
    root = (data_dir or default_data_dir()).expanduser()
    # One `up` per data directory: a second would start another chain on the same files (and
    # --fresh would remove the running one's). Held until this process ends.
    InstanceLock(root, "unchained up").acquire()
    plan = MarketPlan(providers=(), verifiers=(), renters=(), params=LOCAL_PARAMS, block_time=block_time,
                      broker_url=broker)
    market = LocalMarket(plan, root, rpc_port=port, backend_port=backend_port, accounts=accounts, persistent=True)
    if fresh:
        for path in market.forget_chain():
            console.print(f"[green]up[/green] removed {path}", soft_wrap=True)

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    try:
        try:
            market.start_infrastructure(lambda line: console.print(f"[green]up[/green] {line}", soft_wrap=True))
        except ChainNotResumable as exc:
            raise CliError(f"{exc}; {FRESH_HINT}") from exc
        assert market.deployment_file is not None
        config = write_config(root / "config.toml", market.chain.rpc_url, market.backend_url, market.deployment_file,
                              market.broker)
        keys = write_dev_keys(root / "dev-keys", accounts)
        model, inputs = write_example(root / "example")
        _print_next(config, keys, model, inputs, market)
        services = supervised(market)
        while True:
            for service in services:  # the chain first: the others follow it
                keep_up(service, lambda line: console.print(f"[yellow]up[/yellow] {line}", soft_wrap=True))
            time.sleep(0.5)
    except KeyboardInterrupt:
        console.print("stopping every process `unchained up` started")
    finally:
        market.stop()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    console.print(f"stopped; files and logs stay in {root}")


@dataclass
class Supervised:
    """One service `up` keeps running: its process, and how to start it again."""

    name: str  # as a sentence's subject: "the backend"
    process: Callable[[], subprocess.Popen[bytes] | None]
    stop: Callable[[], object]
    start: Callable[[], object]  # raises a CliError if it did not come back
    kept: str  # what it comes back with
    where: Callable[[], str]  # where it answers once back
    restarts: deque[float] = field(default_factory=deque)  # when the last ones were

    def restart(self) -> None:
        self.stop()  # whatever it left behind (its process group, a port half taken)
        try:
            self.start()
        except CliError:
            self.stop()  # one that never answered is not left running
            raise


def supervised(market: LocalMarket) -> list[Supervised]:
    """anvil, a redis-server of our own, and the backend: in this order (the others follow the chain)."""
    chain, broker = market.chain, market.broker

    def backend() -> Service:  # a new Service each start
        return market.services["backend"]

    # The same contracts come back, or the parties would follow a chain without them.
    services = [Supervised("anvil", lambda: chain.process, chain.stop, market.start_kept_chain,
                           f"from the chain kept in {chain.state} (written every {chain.state_interval} s), "
                           "on the same port", lambda: chain.rpc_url)]
    if broker.server is not None:
        server = broker.server
        services.append(Supervised("the broker", lambda: server.proc, broker.stop, broker.start,
                                   f"on the same port, users and data; its log: {server.log_path}", lambda: broker.url))
    services.append(Supervised("the backend", lambda: backend().proc, lambda: backend().stop(), market.start_backend,
                               f"on the same chain and broker; its log: {backend().log_path}",
                               lambda: market.backend_url))
    return services


def keep_up(service: Supervised, say: Callable[[str], object]) -> None:
    """Starts `service` again if it exited, at most RESTARTS times within RESTART_WINDOW_S; past
    that, raises."""
    from devtools.market import ChainNotResumable

    proc = service.process()
    if proc is not None and proc.poll() is None:
        return
    status = proc.returncode if proc is not None else "unknown"
    restarts, now = service.restarts, time.monotonic()
    while restarts and now - restarts[0] > RESTART_WINDOW_S:
        restarts.popleft()
    if len(restarts) >= RESTARTS:
        raise CliError(f"{service.name} exited {len(restarts) + 1} times within {RESTART_WINDOW_S / 60:g} min "
                       f"(last exit status {status}), so `up` stops; it was started again {service.kept}")
    restarts.append(now)
    say(f"{service.name} exited (status {status}); starting it again ({len(restarts)} of {RESTARTS} "
        f"restarts within {RESTART_WINDOW_S / 60:g} min), {service.kept}")
    try:
        service.restart()
    except CliError as exc:  # it exited or never answered: the next look counts another restart
        hint = f"; {FRESH_HINT}" if isinstance(exc, ChainNotResumable) else ""
        say(f"{service.name} did not come back: {str(exc).strip().splitlines()[0]}{hint}")
        return
    say(f"{service.name} at {service.where()} again")


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
