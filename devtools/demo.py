"""`unchained demo`: the whole market on this machine, as real processes, in about three minutes.

anvil runs the contracts; a Celery broker (a private redis-server, or SQLite without Redis), the
backend, two provider agents and two verifiers run as their own `unchained ...` processes, each
signing with its own keystore. One provider is honest and mines when idle; the other passes its
first Proof-of-GPU rounds honestly to get listed, then returns garbage for some items of a job
and skips its PoG work (devtools/cheats.py). Renters pay from their wallets: a job to each
provider and a lease. Everything the demo prints comes from the public API, the chain and the
agents' status pages (devtools/feed.py); the verdicts and slashes are the services' own.
"""

from __future__ import annotations

import dataclasses
import io
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from renter.client import BackendClient
from renter.orders import (bind_ssh_key, confirm_delivery, end_lease, start_lease, submit_job,
                            wait_for_access)
from renter.wallet import Wallet
from client.keystore import load_keystore
from protocol.jobs import encode_output
from provider_agent.lease_env import LeaseEnvError, LeaseEnvironments
from unchained_cli.errors import CliError
from devtools.feed import MarketFeed
from devtools.market import (FAST_PARAMS, Accounts, LocalMarket, MarketPlan, Party,
                                  ProviderPlan, eth)

CHEAT = "pog-from-round=3,job-every=5"  # rounds 1-2 (one per verifier) honest: listed, then cheats
DEMO_PLAN = MarketPlan(
    providers=(ProviderPlan("honest", 1, mining=True),
               ProviderPlan("cheater", 2, mining=False, cheat=CHEAT, price_per_job_unit_wei=5 * 10**11)),
    verifiers=(5, 6), renters=(3, 4), pog_interval_s=40.0,
    # Long enough for a verifier to re-execute a job on a busy 2-core machine before it is paid.
    params=dataclasses.replace(FAST_PARAMS, challenge_window=60))
JOB_ITEMS = 6
MAX_PRICE_WEI = 10**17


class DemoError(CliError):
    """The scenario did not reach a step in time; the message says which, with the logs' tails."""


@dataclass(frozen=True)
class DemoResult:
    accounts: Accounts
    honest_job: int
    cheater_job: int
    lease_id: int
    feed: MarketFeed
    root: Path


def demo_model() -> bytes:
    """The renters' model: a small TorchScript network, built here (nothing is downloaded)."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(7)
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(self.fc(x))

    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(Net()), buffer)
    return buffer.getvalue()


def job_inputs(seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [encode_output(rng.standard_normal(8).astype(np.float32)) for _ in range(JOB_ITEMS)]


class Renter:
    """A renter with its own keystore: its backend session and its wallet."""

    def __init__(self, market: LocalMarket, party: Party) -> None:
        self.name = party.name
        account = load_keystore(party.keystore, market.password_file)
        self.client = BackendClient.connect(market.backend_url, account)
        self.wallet = Wallet(market.chain.rpc_url, account, market.deployment_file)


class Scenario:
    def __init__(self, market: LocalMarket, console: Console, timeout_s: float) -> None:
        self.market, self.console, self.timeout_s = market, console, timeout_s
        self.feed = MarketFeed(market)
        self.started = time.monotonic()

    def follow(self, what: str, done: Callable[[], bool], timeout_s: float | None = None) -> None:
        """Prints the market's news until `done`; a step that never comes fails with the logs."""
        end = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            for line in self.feed.poll():
                self.console.log(line)
            if done():
                return
            if time.monotonic() > end:
                tails = "\n".join(f"--- {name} ---\n{s.tail(1500)}" for name, s in self.market.services.items())
                raise DemoError(f"timed out waiting for {what}\n{tails}")
            for name, service in self.market.services.items():
                if not service.alive:
                    raise DemoError(f"{name} exited while waiting for {what}:\n{service.tail()}")
            time.sleep(0.5)

    def listed(self, name: str) -> bool:
        address = self.market.parties[name].address.lower()
        try:
            return bool(self.market.api(f"/providers/{address}").get("pog_passed"))  # type: ignore[union-attr]
        except Exception:  # not indexed yet
            return False

    def _log_in(self, renter: Renter, lease_id: int) -> None:
        """The renter binds an SSH key to the lease, waits for the provider's signed connection
        details and runs a command on the leased machine with a real ssh client."""
        try:
            LeaseEnvironments.check_tools()
        except LeaseEnvError as exc:
            self.console.log(f"lease {lease_id}: no SSH login in this demo ({exc})")
            return
        key = self.market.root / "keystores" / f"{renter.name}-ssh"
        if not key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        bind_ssh_key(renter.client, renter.wallet, lease_id, key.with_suffix(".pub").read_text())
        access = wait_for_access(renter.client, renter.wallet, lease_id, 60)
        self.console.log(f"{renter.name}: lease {lease_id} offered (its hash bound on-chain): "
                         f"{' '.join(access.ssh_command())}, host key {access.host_key_fingerprint}")
        command = "hostname; echo GPUs: ${CUDA_VISIBLE_DEVICES:-none}; nproc; df -h ~ | tail -1"
        ran = subprocess.run(["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                              "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={key}.known_hosts",
                              "-o", "LogLevel=ERROR", *access.ssh_command()[1:], command],
                             capture_output=True, text=True, timeout=60)
        if ran.returncode != 0:
            raise DemoError(f"ssh into lease {lease_id} failed: {ran.stderr.strip()}")
        confirm_delivery(renter.wallet, lease_id, access)  # logged in: the provider is paid from its offer on
        self.console.log(f"{renter.name} over SSH on the leased machine: {' | '.join(ran.stdout.split(chr(10))[:-1])}")

    def run(self) -> tuple[int, int, int]:
        m = self.market
        self.follow("both providers to pass Proof of GPU", lambda: self.listed("honest") and self.listed("cheater"))
        alice, bob = (Renter(m, p) for p in m.renters())
        model = alice.client.push_model(demo_model(), "demo-net.pt", "torchscript", private=False)["content_hash"]
        self.console.log(f"{alice.name} pushed model {model} to the hub")
        honest_job = self._submit(alice, model, "honest", seed=1)
        cheater_job = self._submit(bob, model, "cheater", seed=2)
        self.follow(f"job {honest_job} to be committed", lambda: self.feed.state("job", honest_job) == "committed")

        lease_id, _cost, _tx = start_lease(alice.wallet, m.parties["honest"].address, 1, 600)
        self.follow("the honest provider's miner to yield to the lease", lambda: self.feed.state("mining", "honest") == "leased", 60)
        self._log_in(alice, lease_id)
        end_lease(alice.wallet, lease_id)
        self.follow(f"lease {lease_id} to end and mining to resume",
                    lambda: self.feed.state("lease", lease_id) == "ended" and self.feed.state("mining", "honest") == "mining", 60)

        cheater = m.parties["cheater"].address.lower()

        def settled() -> bool:
            slashed_twice = sum(e.kind == "slash" and e.text.startswith("[bold red]cheater") for e in self.feed.events) >= 2
            return (self.feed.state("job", honest_job) == "finalized" and self.feed.state("job", cheater_job) == "refunded"
                    and slashed_twice)

        self.follow("the honest job to be paid, the cheater's job refunded and the cheater slashed twice "
                    f"(PoG fraud and job fault; {cheater})", settled)
        return honest_job, cheater_job, lease_id

    def _submit(self, renter: Renter, model: str, provider: str, seed: int) -> int:
        job = submit_job(renter.client, renter.wallet, model, job_inputs(seed), MAX_PRICE_WEI,
                         provider=self.market.parties[provider].address, batch_size=4, tolerance_ppm=1000).job
        self.console.log(f"{renter.name} submits job {job.id}: {JOB_ITEMS} items to {provider} for "
                         f"{eth(job.price)} ETH (spec 0x{job.spec_hash.hex()})")
        return job.id


def run(console: Console | None = None, root: Path | None = None, plan: MarketPlan = DEMO_PLAN,
        timeout_s: float = 240.0) -> DemoResult:
    """Runs the scenario; stops every process it started, also on Ctrl-C or an error."""
    console = console or Console()
    root = root or Path(tempfile.mkdtemp(prefix="unchained-demo-"))
    market = LocalMarket(plan, root)
    try:
        market.start_infrastructure(console.log)
        ledger = market.ledger().open()
        market.start_parties(console.log)
        scenario = Scenario(market, console, timeout_s)
        honest_job, cheater_job, lease_id = scenario.run()
        console.log("providers and verifiers stop; every party withdraws what the contracts owe it")
        market.stop_parties()
        market.withdraw_all()
        accounts = ledger.close()
        _print_summary(console, market, scenario.feed, accounts)
        return DemoResult(accounts, honest_job, cheater_job, lease_id, scenario.feed, root)
    finally:
        console.log("stopping every process")
        market.stop()
        console.log(f"logs in {root / 'logs'}")


def balance_tables(addresses: dict[str, str], accounts: Accounts, staked: dict[str, int]) -> list[Table]:
    """Every party's balances, then its full address and stake: two tables, so that each fits
    80 columns without cutting a number or an address."""
    balances = Table(title="balances (ETH): before, after, change, gas paid")
    for column in ("party", "before", "after", "change", "gas"):
        balances.add_column(column, justify="left" if column == "party" else "right", no_wrap=True)
    for name in addresses:
        balances.add_row(name, eth(accounts.before[name]), eth(accounts.after[name]), eth(accounts.change(name)),
                         eth(accounts.gas[name]))
    parties = Table(title="parties: address, stake still bonded (ETH)")
    for column in ("party", "address", "staked"):
        parties.add_column(column, justify="right" if column == "staked" else "left", no_wrap=True)
    for name, address in addresses.items():
        parties.add_row(name, address, eth(staked[name]))
    return [balances, parties]


def _print_summary(console: Console, market: LocalMarket, feed: MarketFeed, accounts: Accounts) -> None:
    s = market.session
    staking = s.contract("Staking")
    addresses = {name: party.address for name, party in market.parties.items()}
    staked = {name: staking.functions.stakeOf(address).call() for name, address in addresses.items()}
    for table in balance_tables(addresses, accounts, staked):
        console.print(table)
    held = Table(title="contract balances (ETH)")
    for column in ("contract", "before", "after"):
        held.add_column(column, justify="left" if column == "contract" else "right")
    for name in accounts.held_before:
        held.add_row(name, eth(accounts.held_before[name]), eth(accounts.held_after[name]))
    console.print(held)
    counts = Table(title="what happened")
    counts.add_column("")
    counts.add_column("count", justify="right")
    for label, kind, state in (("PoG rounds passed", "pog", "passed"), ("PoG rounds failed", "pog", "failed"),
                               ("jobs finalized (provider paid)", "job", "finalized"),
                               ("jobs refunded", "job", "refunded"), ("leases ended", "lease", "ended"),
                               ("challenges opened", "challenge", "open"), ("slashes", "slash", "slashed"),
                               ("miner pauses", "mining", "paused"), ("miner yields to a lease", "mining", "leased")):
        counts.add_row(label, str(sum(e.kind == kind and e.state == state for e in feed.events)))
    console.print(counts)
    verdict = "yes" if accounts.unaccounted == 0 else f"[red]NO: {accounts.unaccounted} wei[/red]"
    console.print(f"every wei accounted for (parties' change + gas + contracts' change = 0): {verdict}")
    if accounts.unaccounted:
        raise DemoError(f"{accounts.unaccounted} wei unaccounted for")
