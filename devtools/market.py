"""The whole market on one machine, as real processes: anvil, the contracts, a Celery broker, the
backend, provider agents and verifiers, each started with its own CLI command and its own key.

`unchained demo`, the end-to-end and fault tests and the load benchmark all run on this. Every
party signs with its own keystore (anvil's development keys, written as eth-account keystores);
nothing here signs for a service. The market stops every process it started, in reverse order,
also when the caller is interrupted; children are started in their own process groups (so a
provider's job child goes with it) and are told to die with this process (Linux: PDEATHSIG).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
from eth_account import Account
from web3 import Web3

from client.broker import grant
from client.keystore import PASSWORD_FILE_ENV
from client.ports import free_port, port_free
from protocol.deployments import Deployment, DeploymentFormatError
from unchained_cli.chain import ChainError, LocalChain, block_time_from_env, die_with_parent
from unchained_cli.deploy import DeployParams, Deployer, deploy_all, write_deployment
from unchained_cli.errors import CliError
from devtools.session import ChainSession

log = logging.getLogger(__name__)

ETH = 10**18
ZERO_ADDRESS = "0x" + "00" * 20
REPO_ROOT = Path(__file__).resolve().parent.parent
CHEATER_SITE = Path(__file__).resolve().parent / "cheater_site"
# anvil's development mnemonic: every key derived from it is public; never use them elsewhere.
DEV_MNEMONIC = "test test test test test test test test test test test junk"
KEYSTORE_PASSWORD = "unchained-local-market"  # protects public development keys only

# Windows short enough to watch a challenge end to end in real time, each still shorter than the
# unbonding delay so that a stake can always be slashed, and long enough for a verifier on a busy
# 2-core machine (a re-execution of a few items takes 5-25 s there) to act inside them. The windows
# after an answer (fraud proof, escalation) only delay a settlement nobody disputes, so they are
# wide: with a block a second and a verifier busy re-executing another job for 15-25 s, a 10 s
# fraud window and a 40 s escalation window closed before the verifier acted, and the cheater's
# wrong answers stood.
FAST_PARAMS = DeployParams(
    challenge_window=45, pog_commit_window=60, root_challenge_period=600, response_window=30,
    fraud_window=45, vote_window=45, escalation_window=90, max_job_duration=2 * 3600,
    unbonding_delay=3 * 3600)  # >= the longest job plus a challenge window (JobEscrow checks)


class MarketError(CliError):
    """A part of the local market did not start or stopped unexpectedly."""


class ChainNotResumable(MarketError):
    """The chain kept in the market's directory cannot be loaded, or lacks the deployment's code."""


@dataclass(frozen=True)
class ProviderPlan:
    name: str
    account: int  # index of anvil's development key
    mining: bool = True
    cheat: str | None = None  # UNCHAINED_CHEAT for a provider that cheats (devtools/cheats.py)
    price_per_job_unit_wei: int = 10**12
    price_per_gpu_hour_wei: int = 10**16


@dataclass(frozen=True)
class MarketPlan:
    providers: tuple[ProviderPlan, ...]
    verifiers: tuple[int, ...]  # anvil key indices
    renters: tuple[int, ...]
    treasury: int = 0  # the deployer: protocol fees and slash shares go there
    params: DeployParams = FAST_PARAMS
    block_time: float = 1.0  # seconds per block
    # True: each transaction is mined at once, and an empty block comes every block_time when idle
    # (windows measured in chain time move on their own). False: transactions wait for the next
    # block, as on a real chain.
    instant: bool = True
    broker_url: str | None = None  # None: a private redis-server if installed, else SQLite
    # On the market's own redis-server, each party connects as its own ACL user (`unchained broker
    # grant`): the backend may only push to providers' queues, a provider reach only its own.
    broker_users: bool = True
    pog_interval_s: float = 30.0
    pog_jitter_s: float = 2.0
    pog_n: int = 256  # small enough for a CPU in a second; a real verifier picks n from the class
    provider_stake_wei: int = 3 * ETH
    verifier_stake_wei: int = 3 * ETH

    @property
    def accounts(self) -> int:
        used = [self.treasury, *self.verifiers, *self.renters, *(p.account for p in self.providers)]
        if len(set(used)) != len(used):
            raise MarketError(f"every party needs its own account; plan uses {sorted(used)}")
        return max(used) + 1


def plan_from_env(plan: MarketPlan, default_block_time: float | None = None) -> MarketPlan:
    """`plan` on the chain that UNCHAINED_TEST_BLOCK_TIME asks for (`default_block_time` when it
    is unset): with a block time, every transaction waits for the next block; with none (0), the
    plan as it is (transactions mined at once)."""
    block_time = block_time_from_env(default_block_time)
    return plan if block_time is None else replace(plan, block_time=block_time, instant=False)


@dataclass
class Service:
    """One process of the market with its log file."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen | None = None

    def start(self) -> Service:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(self.argv, cwd=REPO_ROOT, env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=die_with_parent)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, kill: bool = False, timeout: float = 15.0) -> None:
        """SIGTERM (or SIGKILL with `kill`) to the whole process group, then wait."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        _signal_group(self.proc.pid, signal.SIGKILL)  # whatever the leader left behind (job children)
        self.proc = None

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_for(predicate: Callable[[], object], timeout: float, interval: float = 0.2) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def dev_account(index: int):  # type: ignore[no-untyped-def]
    Account.enable_unaudited_hdwallet_features()
    return Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")


def write_password_file(directory: Path) -> Path:
    """The market's keystore password as a file (mode 0600): every party is given its path
    (UNCHAINED_PASSWORD_FILE or --password-file), never the password itself."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "password"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(KEYSTORE_PASSWORD + "\n")
    return path


def write_keystore(directory: Path, index: int) -> tuple[Path, str]:
    """anvil's development key `index` as an eth-account keystore (cheap scrypt: public keys)."""
    account = dev_account(index)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"account-{index}.json"
    if not path.exists():
        path.write_text(json.dumps(Account.encrypt(account.key, KEYSTORE_PASSWORD, kdf="scrypt", iterations=1 << 10)))
    return path, account.address


# -- the broker ------------------------------------------------------------------------------------

BROKER_DATA = "broker-data"  # redis-server's append-only files, in the market's directory


def _kept_port(path: Path) -> int:
    """The port a persistent broker had before, while it is free (parties hold URLs with it), else a
    new one, written down for the next start."""
    try:
        port = int(path.read_text())
    except (OSError, ValueError):
        port = 0
    if not port or not port_free(port):
        port = free_port()
        path.write_text(f"{port}\n")
    return port


@dataclass
class Broker:
    """The Celery broker of the market: a private redis-server (restartable, so faults can be
    tested), a given URL, or Celery's SQLAlchemy transport on SQLite when no Redis is installed."""

    url: str
    server: Service | None = None
    port: int | None = None
    users: bool = False  # grant each party its own user (on a server of our own only)

    @classmethod
    def choose(cls, root: Path, url: str | None, persistent: bool = False) -> Broker:
        """`persistent`: a redis-server of our own keeps its data in `root` (an append-only file,
        written before each answer: a development broker's load), so queued tasks and claims
        survive its restart."""
        if url:
            return cls(url)
        binary = shutil.which("redis-server")
        if binary is None:
            return cls(f"sqla+sqlite:///{root / 'broker.sqlite'}")
        port = _kept_port(root / "broker-port") if persistent else free_port()
        users = root / "broker-users.acl"  # the granted users survive a restart (fault tests)
        users.touch()
        kept = ["--appendonly", "yes", "--appendfsync", "always", "--appenddirname", BROKER_DATA] if persistent \
            else ["--appendonly", "no"]
        server = Service("redis", [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", *kept,
                                   "--dir", str(root), "--aclfile", str(users)],
                         dict(os.environ), root / "logs" / "redis.log")
        return cls(f"redis://127.0.0.1:{port}/0", server, port)

    def data_paths(self) -> list[Path]:
        """Where the broker keeps queued tasks (the users file is not tied to a chain)."""
        if self.server is not None:
            return [Path(self.server.argv[self.server.argv.index("--dir") + 1]) / BROKER_DATA]
        path = self.url.removeprefix("sqla+sqlite:///")
        return [Path(path)] if path != self.url else []

    def url_for(self, role: str, address: str | None = None) -> str:
        """The URL a party connects with: its own user on a server of our own, else the URL."""
        return grant(self.url, role, address) if self.server is not None and self.users else self.url

    @property
    def kind(self) -> str:
        return "redis" if self.url.startswith("redis") else "sqlite" if self.url.startswith("sqla+") else "other"

    def start(self) -> None:
        if self.server is None:
            return
        self.server.start()
        if not wait_for(self._answers, 10, 0.05):
            raise MarketError(f"redis-server did not start:\n{self.server.tail()}")

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port or 0), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False


# -- accounting ------------------------------------------------------------------------------------


@dataclass
class Ledger:
    """Every party's balance before and after, the gas each paid, and what the contracts hold:
    a market that loses nothing satisfies sum(change) + sum(gas) + contracts' change == 0."""

    session: ChainSession
    parties: dict[str, str]  # name -> address
    contracts: dict[str, str]  # name -> address
    start_block: int = 0
    before: dict[str, int] = field(default_factory=dict)
    held_before: dict[str, int] = field(default_factory=dict)

    def open(self) -> Ledger:
        # Balances and gas are read at one block: another may be mined (every second) meanwhile.
        self.start_block = block = self.session.web3.eth.block_number
        self.before = self._balances(self.parties, block)
        self.held_before = self._balances(self.contracts, block)
        return self

    def _balances(self, addresses: dict[str, str], block: int) -> dict[str, int]:
        return {n: self.session.web3.eth.get_balance(a, block) for n, a in addresses.items()}

    def gas_paid(self, end_block: int) -> dict[str, int]:
        """Fees of every transaction each party sent after the ledger opened, up to `end_block`
        (read from the blocks, since each party sends from its own process)."""
        web3 = self.session.web3
        by_address = {a.lower(): n for n, a in self.parties.items()}
        paid = dict.fromkeys(self.parties, 0)
        for number in range(self.start_block + 1, end_block + 1):
            for receipt in web3.eth.get_block_receipts(number):
                name = by_address.get(receipt["from"].lower())
                if name is not None:
                    paid[name] += receipt["gasUsed"] * receipt["effectiveGasPrice"]
        return paid

    def close(self) -> Accounts:
        block = self.session.web3.eth.block_number
        return Accounts(self.before, self._balances(self.parties, block), self.gas_paid(block), self.held_before,
                        self._balances(self.contracts, block))


@dataclass(frozen=True)
class Accounts:
    before: dict[str, int]
    after: dict[str, int]
    gas: dict[str, int]
    held_before: dict[str, int]
    held_after: dict[str, int]

    def change(self, party: str) -> int:
        return self.after[party] - self.before[party]

    @property
    def unaccounted(self) -> int:
        """Wei that left the parties and the contracts other than as gas: 0 when nothing is lost."""
        parties = sum(self.change(p) + self.gas[p] for p in self.before)
        contracts = sum(self.held_after[c] - self.held_before[c] for c in self.held_before)
        return parties + contracts


# -- the market ------------------------------------------------------------------------------------

PAYOUT_CONTRACTS = ("Staking", "JobEscrow", "LeaseManager", "ChallengeManager")


@dataclass
class Party:
    name: str
    account: int
    keystore: Path
    address: str


class LocalMarket:
    """Starts the plan's parts in order and stops them all; see the module docstring."""

    def __init__(self, plan: MarketPlan, root: Path, *, rpc_port: int | None = None,
                 backend_port: int | None = None, accounts: int | None = None, persistent: bool = False) -> None:
        """Ports default to free ones (tests, demo); `unchained up` asks for the documented ones.
        `persistent`: the chain (chain/state.json) and the broker's data (Redis's append-only
        file) are kept in `root`, so that a restarted anvil or redis-server, or a new market on
        the same directory, goes on with them (see `start_infrastructure`)."""
        self.plan = plan
        self.root = root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.services: dict[str, Service] = {}
        self.chain = LocalChain(port=rpc_port or free_port(), block_time=plan.block_time,
                                accounts=max(accounts or 0, plan.accounts), mixed_mining=plan.instant,
                                state=self.root / "chain" / "state.json" if persistent else None)
        self.broker = replace(Broker.choose(self.root, plan.broker_url, persistent), users=plan.broker_users)
        self.backend_port = backend_port or free_port()
        self.metrics_ports: dict[str, int] = {}
        keys = self.root / "keystores"
        self.password_file = write_password_file(keys)
        self.parties: dict[str, Party] = {}
        for name, index in [("treasury", plan.treasury), *((p.name, p.account) for p in plan.providers),
                            *((f"verifier-{i + 1}", a) for i, a in enumerate(plan.verifiers)),
                            *((f"renter-{i + 1}", a) for i, a in enumerate(plan.renters))]:
            path, address = write_keystore(keys, index)
            self.parties[name] = Party(name, index, path, address)
        self.deployment: Deployment | None = None
        self.deployment_file: Path | None = None
        self.session: ChainSession | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> LocalMarket:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, on_step: Callable[[str], object] = lambda _: None) -> None:
        self.start_infrastructure(on_step)
        self.start_parties(on_step)

    def start_infrastructure(self, on_step: Callable[[str], object] = lambda _: None) -> None:
        """The chain with the contracts, the broker and the backend: what the operator runs. A
        persistent market whose directory keeps a chain goes on with it (same contracts, backend
        database and broker data); else the chain is new and the contracts are deployed."""
        state = self.chain.state
        resume = state is not None and state.exists()
        if state is not None and not resume:
            for path in self.forget_chain():  # left by a chain that is gone (none was kept)
                on_step(f"removed {path}, of a chain not kept")
        if resume:
            self.start_kept_chain()
        else:
            self.chain.start()
        on_step(f"anvil at {self.chain.rpc_url} (transactions mined at once, a block every "
                f"{self.plan.block_time:g} s when idle)" if self.plan.instant else
                f"anvil at {self.chain.rpc_url} (a block every {self.plan.block_time:g} s)")
        if resume:
            assert self.deployment is not None
            on_step(f"the chain kept in {state} goes on at block {self.chain_id_and_block()[1]}, "
                    f"with the {len(self.deployment.contracts)} contracts of {self.deployment_file}")
        else:
            params = replace(self.plan.params, treasury=self.parties["treasury"].address)
            deployer = Deployer.connect(self.chain.rpc_url)
            with self.chain.mining_at_once():  # the operator's one-off set-up; the parties wait for blocks
                self.deployment = deploy_all(deployer, params)
            self.deployment_file = write_deployment(self.deployment, self.root / "deployments")
            on_step(f"{len(self.deployment.contracts)} contracts deployed on chain {self.deployment.chain_id}")
        self.session = ChainSession.connect(self.chain.rpc_url, self.deployment)
        self.broker.start()
        on_step(f"Celery broker: {self.broker.kind} ({self.broker.url})")
        self.start_backend()
        on_step(f"backend at {self.backend_url}")

    def start_kept_chain(self) -> None:
        """anvil on the chain kept in the directory (a persistent market), its deployment's code
        checked; ChainNotResumable if it cannot be loaded or lacks that code."""
        try:
            self.chain.start()
        except ChainError as exc:
            raise ChainNotResumable(f"anvil could not load the chain kept in {self.chain.state}: "
                                    f"{str(exc).strip().splitlines()[-1]}") from exc
        self.deployment_file, self.deployment = self.kept_deployment()

    def kept_deployment(self) -> tuple[Path, Deployment]:
        """The deployment file of the chain kept in the directory, once its code is found at every
        address (a chain that lost it would take the parties' transactions to empty addresses)."""
        path = self.root / "deployments" / f"{self.chain_id_and_block()[0]}.json"
        try:
            deployment = Deployment.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, DeploymentFormatError) as exc:
            raise ChainNotResumable(f"the deployment of the chain kept in {self.chain.state} is unreadable: "
                                    f"{exc}") from exc
        web3 = Web3(Web3.HTTPProvider(self.chain.rpc_url))
        missing = [name for name, c in deployment.contracts.items() if not web3.eth.get_code(c.address)]
        if missing:
            raise ChainNotResumable(f"the chain kept in {self.chain.state} holds no code at the addresses of "
                                    f"{', '.join(sorted(missing))} in {path}")
        return path, deployment

    def chain_id_and_block(self) -> tuple[int, int]:
        web3 = Web3(Web3.HTTPProvider(self.chain.rpc_url))
        return int(web3.eth.chain_id), int(web3.eth.block_number)

    def forget_chain(self) -> list[Path]:
        """Removes what belongs to the kept chain (its state, deployment, backend database and
        broker data: they describe a chain that is gone once a new one starts); returns what was
        there."""
        found = [p for p in (self.root / "chain", self.root / "deployments", self.backend_data,
                             *self.broker.data_paths()) if p.exists()]
        for path in found:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        return found

    def start_parties(self, on_step: Callable[[str], object] = lambda _: None) -> None:
        """Provider agents (they stake and register on start), then the verifiers."""
        for plan in self.plan.providers:
            self.start_provider(plan.name)
        for plan in self.plan.providers:
            self.wait_provider(plan.name)
            on_step(f"provider {plan.name} {self.parties[plan.name].address} registered"
                    + (f" (cheats: {plan.cheat})" if plan.cheat else ""))
        for i in range(len(self.plan.verifiers)):
            self.start_verifier(f"verifier-{i + 1}")
        on_step(f"{len(self.plan.verifiers)} verifier(s) running")

    def stop_parties(self) -> None:
        """Stops the provider agents and verifiers (the backend, broker and chain stay up), e.g.
        before their owners act from the same accounts by hand."""
        for name in reversed(list(self.services)):
            if name != "backend":
                self.services[name].stop()

    def stop(self) -> None:
        for name in reversed(list(self.services)):
            self.services[name].stop()
        self.broker.stop()
        self.chain.stop()

    def ledger(self) -> Ledger:
        assert self.session is not None and self.deployment is not None
        return Ledger(self.session, {n: p.address for n, p in self.parties.items()},
                      {c: self.deployment.contract(c).address for c in PAYOUT_CONTRACTS})

    # -- parts -------------------------------------------------------------------------------

    @property
    def backend_url(self) -> str:
        return f"http://127.0.0.1:{self.backend_port}"

    @property
    def backend_data(self) -> Path:
        return self.root / "backend"

    def _launch(self, name: str, args: list[str], env: dict[str, str], extra_path: Path | None = None) -> Service:
        full_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        full_env["PYTHONPATH"] = os.pathsep.join(
            str(p) for p in (extra_path, REPO_ROOT, os.environ.get("PYTHONPATH")) if p)
        service = Service(name, [sys.executable, "-m", "unchained_cli.main", *args], full_env,
                          self.root / "logs" / f"{name}.log")
        self.services[name] = service.start()
        return service

    def start_backend(self) -> None:
        prefix = "UNCHAINED_BACKEND_"
        env = {prefix + k.upper(): str(v) for k, v in {
            "data_dir": self.backend_data, "rpc_url": self.chain.rpc_url, "deployment_file": self.deployment_file,
            "confirmations": 0, "index_poll_seconds": 0.2, "broker_url": self.broker.url_for("backend"),
            "dispatch": "true", "public_url": self.backend_url,
            # the dispatch key: the deployer's (anvil #0), which providers take jobs from
            "keystore": write_keystore(self.root / "keystores", 0)[0], "password_file": self.password_file,
        }.items()}
        service = self._launch("backend", ["backend", "serve", "--port", str(self.backend_port)], env)
        if not wait_for(lambda: self._healthy(service), 60, 0.2):
            raise MarketError(f"the backend did not start:\n{service.tail()}")

    def _healthy(self, service: Service) -> bool:
        if not service.alive:
            raise MarketError(f"the backend exited:\n{service.tail()}")
        try:
            return httpx.get(f"{self.backend_url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def provider_plan(self, name: str) -> ProviderPlan:
        return next(p for p in self.plan.providers if p.name == name)

    def provider_data(self, name: str) -> Path:
        return self.root / name

    def start_provider(self, name: str) -> Service:
        plan, party = self.provider_plan(name), self.parties[name]
        port = self.metrics_ports.setdefault(name, free_port())
        prefix = "UNCHAINED_PROVIDER_"
        env = {prefix + k.upper(): str(v) for k, v in {
            "rpc_url": self.chain.rpc_url, "keystore": party.keystore,
            "deployments_dir": self.deployment_file.parent, "broker_url": self.broker.url_for("provider", party.address),
            "backend_url": self.backend_url, "data_dir": self.provider_data(name), "mining": plan.mining,
            "stake_wei": self.plan.provider_stake_wei, "price_per_job_unit_wei": plan.price_per_job_unit_wei,
            "price_per_gpu_hour_wei": plan.price_per_gpu_hour_wei, "metadata_uri": f"demo://{name}",
            "cpu_device_id": f"{name}-{party.address}",  # one machine, one simulated device per provider
            "heartbeat_s": 2.0, "job_timeout_s": 60.0, "job_memory_bytes": 3 << 30,
            "upload_backoff_s": 0.2, "upload_retry_s": 2.0, "visibility_timeout_s": 60,
            "mining_resume_after_s": 1.0,
            # One machine: leases' sshd answer on loopback, under the name the renter is given.
            "lease_public_host": "127.0.0.1", "lease_listen_host": "127.0.0.1"}.items()}
        env[PASSWORD_FILE_ENV] = str(self.password_file)
        if plan.cheat:
            env["UNCHAINED_CHEAT"] = plan.cheat
        return self._launch(name, ["provider", "run", "--metrics-port", str(port)], env,
                            CHEATER_SITE if plan.cheat else None)

    def provider_status(self, name: str) -> dict | None:
        try:
            return httpx.get(f"http://127.0.0.1:{self.metrics_ports[name]}/status", timeout=2).json()
        except (httpx.HTTPError, ValueError, KeyError):
            return None

    def wait_provider(self, name: str, timeout: float = 90.0) -> None:
        """Until the agent serves its status as a registered provider (its worker is starting)."""
        service = self.services[name]

        def registered() -> bool:
            if not service.alive:
                raise MarketError(f"provider {name} exited:\n{service.tail()}")
            status = self.provider_status(name)
            return bool(status and status.get("registered"))

        if not wait_for(registered, timeout, 0.3):
            raise MarketError(f"provider {name} did not register in {timeout:.0f}s:\n{service.tail()}")

    def start_verifier(self, name: str) -> Service:
        party = self.parties[name]
        port = self.metrics_ports.setdefault(name, free_port())
        prefix = "UNCHAINED_VERIFIER_"
        env = {prefix + k.upper(): str(v) for k, v in {
            "rpc_url": self.chain.rpc_url, "keystore": party.keystore,
            "deployment_file": self.deployment_file, "broker_url": self.broker.url_for("verifier", party.address),
            "backend_url": self.backend_url,
            "stake_wei": self.plan.verifier_stake_wei, "pog_interval_s": self.plan.pog_interval_s,
            "pog_jitter_s": self.plan.pog_jitter_s, "pog_n": self.plan.pog_n, "pog_dtype": "fp32",
            "pog_backoff_s": 3, "poll_s": 1.0, "metrics_port": port, "work_dir": self.root / name,
            "audit_backoff_s": 1.0, "reexec_memory_bytes": 3 << 30, "reexec_timeout_s": 60}.items()}
        env[PASSWORD_FILE_ENV] = str(self.password_file)
        return self._launch(name, ["verifier", "run"], env)

    # -- what parties see --------------------------------------------------------------------

    def api(self, path: str, **params: object) -> object:
        response = httpx.get(f"{self.backend_url}{path}", params=params, timeout=10)
        response.raise_for_status()
        return response.json()

    def renters(self) -> list[Party]:
        return [p for n, p in self.parties.items() if n.startswith("renter-")]

    def providers(self) -> list[Party]:
        return [self.parties[p.name] for p in self.plan.providers]

    def withdraw_all(self, names: Iterable[str] | None = None) -> None:
        """Every party pulls what the payout contracts owe it (as each would, with its own key:
        anvil's unlocked development accounts stand in for their wallets here). Stop the
        parties' services first: two senders on one account race for its nonces."""
        s = self.session
        assert s is not None
        for name in names or self.parties:
            address = self.parties[name].address
            escrow = s.contract("JobEscrow")
            if escrow.functions.owedTo(ZERO_ADDRESS, address).call():
                s.send(escrow.functions.withdraw(ZERO_ADDRESS), address)
            for contract_name in ("LeaseManager", "ChallengeManager", "Staking"):
                contract = s.contract(contract_name)
                if contract.functions.owedTo(address).call():
                    s.send(contract.functions.withdraw(), address)


def eth(wei: int) -> str:
    sign = "-" if wei < 0 else ""
    return f"{sign}{Web3.from_wei(abs(wei), 'ether'):,.6f}"
