"""`unchained verifier ...`: the verifier service (mounted by the root app)."""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from client.cli_output import Output, OutputFormat, print_json
from client.keystore import PASSWORD_FILE_HELP
from verifier import VerifierError

# `run` imports the service (web3, celery, prometheus-client, torch for re-execution) itself:
# `unchained verifier --help` starts without them.

verifier_app = typer.Typer(help="Verifier: stake, run Proof-of-GPU rounds, challenge and slash cheaters.",
                           no_args_is_help=True)
console = Console()


@verifier_app.callback()
def verifier() -> None:
    """Verifier: stake, run Proof-of-GPU rounds, challenge and slash cheaters."""


def _option(env: str, help: str, **kw: Any) -> Any:
    return typer.Option(envvar=f"UNCHAINED_VERIFIER_{env}", help=help, **kw)


@verifier_app.command("run")
def run(
    rpc: Annotated[str | None, _option("RPC_URL", "JSON-RPC URL; default: http://127.0.0.1:8545.")] = None,
    keystore: Annotated[Path | None, _option("KEYSTORE", "The verifier's keystore.", exists=True,
                                             dir_okay=False)] = None,
    password_file: Annotated[Path | None, typer.Option("--password-file", dir_okay=False, help=PASSWORD_FILE_HELP)] = None,
    broker: Annotated[str | None, _option("BROKER_URL", "Celery broker URL (redis://... or sqla+sqlite:///FILE); "
                                                        "default: redis://127.0.0.1:6379/0.")] = None,
    backend: Annotated[str | None, _option("BACKEND_URL", "Backend URL: jobs to audit and vote on; "
                                                          "default: none (PoG rounds only).")] = None,
    deployment: Annotated[Path | None, _option("DEPLOYMENT_FILE", "deployments/<chainId>.json; default: "
                                                                  "./deployments/<chainId>.json.")] = None,
    work_dir: Annotated[Path | None, _option("WORK_DIR", "Models and inputs of re-executed samples; "
                                                         "default: ~/.unchained/<chainId>/verifier.")] = None,
    pog_interval: Annotated[float | None, _option("POG_INTERVAL_S", "Seconds between rounds per provider "
                                                                    "(default 21600).", min=1)] = None,
    pog_jitter: Annotated[float | None, _option("POG_JITTER_S", "Random delay of each round, up to this many "
                                                                "seconds; a new provider's first round "
                                                                "comes within it (default 3600).", min=0)] = None,
    pog_n: Annotated[int | None, _option("POG_N", "Matrix size of every round (multiple of 64); default: "
                                                  "from each provider's claimed GPU class.", min=64)] = None,
    pog_dtype: Annotated[str | None, _option("POG_DTYPE", "int8, fp16, bf16 or fp32 (default int8: the class is named from the fastest exact arithmetic).")] = None,
    stake: Annotated[float | None, typer.Option(help="ETH staked at start when below the minimum (default 2).",
                                                min=0)] = None,
    metrics_port: Annotated[int | None, _option("METRICS_PORT", "Prometheus /metrics port (default 9102; "
                                                                "0: off).", min=0, max=65535)] = None,
    audit_all: Annotated[bool | None, _option("AUDIT_ALL", "Audit every committed job; default: each job drawn "
                                                           "secretly with at least the probability that makes "
                                                           "cheating on it a loss (docs/PROTOCOL.md), plus "
                                                           "every other one capacity allows.")] = None,
) -> None:
    """Stake if needed, then run rounds and follow challenges until interrupted."""
    from client.chain import open_chain
    from client.instance_lock import InstanceLock
    from client.keystore import load_keystore
    from client.task_auth import TaskAuth, domain_of
    from client.units import eth
    from prometheus_client import start_http_server
    from protocol.tasks import BadBrokerUrl
    from verifier.audit_draw import AuditDraw
    from verifier.backend_client import VerifierBackend
    from verifier.chain import VerifierChain
    from verifier.committee import CommitteeMember
    from verifier.job_audit import JobAuditor, JobReexecutor
    from verifier.links import CeleryProverLink, make_celery
    from verifier.reexec import ReexecLimits
    from verifier.service import VerifierService
    from verifier.settings import Settings
    from verifier.signed_results import SignedResultSlasher
    from web3 import Web3

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    overrides = {k: v for k, v in {
        "rpc_url": rpc, "keystore": keystore, "password_file": password_file, "broker_url": broker, "backend_url": backend,
        "deployment_file": deployment, "work_dir": work_dir, "pog_interval_s": pog_interval,
        "pog_jitter_s": pog_jitter, "pog_n": pog_n, "pog_dtype": pog_dtype,
        "stake_wei": Web3.to_wei(stake, "ether") if stake is not None else None,
        "metrics_port": metrics_port, "audit_all": audit_all,
    }.items() if v is not None}
    try:
        settings = Settings.from_env(**overrides)
        if settings.keystore is None:
            raise VerifierError("a verifier signs with its own key: pass --keystore")
        key_file = settings.keystore
        try:  # the URL is checked before the chain is asked anything; the key signs on first send
            app = make_celery(settings.broker_url, lambda: task_auth)
        except BadBrokerUrl as exc:
            raise VerifierError(f"--broker: {exc}") from exc
        _, known = open_chain(settings.rpc_url, deployment_file=settings.deployment_file, timeout_s=30)
        if work_dir is None:  # one directory per network, not the current directory
            settings = settings.model_copy(update={"work_dir": Path.home() / ".unchained" / str(known.chain_id)
                                                   / "verifier"})
        if settings.state_db is None:
            settings = settings.model_copy(update={"state_db": settings.work_dir / "state.sqlite"})
        # One verifier per work directory (its state file and cursor are not shared), said before
        # the key is opened; held until this process ends.
        InstanceLock(settings.work_dir, "verifier", "--work-dir").acquire()
        account = load_keystore(key_file, settings.password_file)
        task_auth = TaskAuth(domain_of(known), account)
        chain = VerifierChain.connect(settings.rpc_url, known, account)
        auditor = committee = slasher = None
        if settings.backend_url:
            backend_client = VerifierBackend(settings.backend_url, account)
            limits = ReexecLimits(settings.reexec_memory_bytes, settings.reexec_timeout_s)
            reexec = JobReexecutor(backend_client, limits, settings.work_dir)
            draw = None if settings.audit_all else AuditDraw.for_account(
                account, chain.contract("ChallengeManager").functions.slashAmount().call())
            auditor = JobAuditor(chain, backend_client, reexec, max_attempts=settings.audit_attempts,
                                 backoff_s=settings.audit_backoff_s, parallel=settings.audit_parallel, draw=draw)
            committee = CommitteeMember(chain, backend_client, reexec)
            slasher = SignedResultSlasher(chain, backend_client)
        service = VerifierService(chain, settings, lambda provider: CeleryProverLink(app, provider),
                                  auditor=auditor, committee=committee, slasher=slasher)
        if settings.metrics_port:
            start_http_server(settings.metrics_port, registry=service.metrics.registry)
        console.print(f"verifier {account.address} on {settings.rpc_url}; stake {eth(service.ensure_staked())}",
                      highlight=False)
        service.run_forever()
    except KeyboardInterrupt:
        console.print("stopped")


Rpc = Annotated[str, _option("RPC_URL", "JSON-RPC URL of the chain.")]
Deployment = Annotated[Path | None, _option("DEPLOYMENT_FILE", "deployments/<chainId>.json; default: "
                                                               "./deployments/<chainId>.json.")]
DEFAULT_RPC = "http://127.0.0.1:8545"


def _me(keystore: Path | None, address: str | None) -> str:
    """--address, or the address the keystore says it holds (a read needs no password)."""
    from client.keystore import keystore_address
    from web3 import Web3

    if address is not None:
        if not Web3.is_address(address):
            raise typer.BadParameter(f"{address!r} is not an address (0x and 40 hex digits)", param_hint="--address")
        return Web3.to_checksum_address(address)
    if keystore is None:
        raise typer.BadParameter("whose? pass --keystore FILE or --address 0x...", param_hint="--keystore")
    found = keystore_address(keystore)
    if found is None:
        raise VerifierError(f"keystore {keystore} does not say which address it holds: pass --address")
    return found


@verifier_app.command("status")
def status(
    keystore: Annotated[Path | None, _option("KEYSTORE", "The verifier's keystore: only its address is read.",
                                             exists=True, dir_okay=False)] = None,
    address: Annotated[str | None, typer.Option(help="The verifier's address, instead of --keystore.")] = None,
    backend: Annotated[str | None, _option("BACKEND_URL", "Backend URL: counts the audits this verifier "
                                                          "reported; default: none.")] = None,
    rpc: Rpc = DEFAULT_RPC,
    deployment: Deployment = None,
    output: Output = OutputFormat.text,
) -> None:
    """Stake (bonded, unbonding and until when), open challenges raised, audits done, payouts owed."""
    import time

    from client.chain import ChainContext, open_chain
    from client.units import eth, when
    from verifier.standing import read_standing

    me = _me(keystore, address)
    standing = read_standing(ChainContext(*open_chain(rpc, deployment_file=deployment, timeout_s=30)), me)
    audits = _audits(backend, me) if backend else None
    if output is OutputFormat.json:
        doc = {"address": me, "bonded": str(standing.bonded), "min_stake": str(standing.min_stake),
               "unbonding": str(standing.unbonding), "release_at": standing.release_at,
               "unbonding_delay": standing.unbonding_delay,
               "raised": [{**asdict(c), "bond": str(c.bond)} for c in standing.raised],
               "open_challenges": [c.challenge_id for c in standing.open_challenges],
               "owed": [{"contract": p.contract, "what": p.what, "amount": str(p.amount), "symbol": p.symbol}
                        for p in standing.owed.payable], "audits": audits}
        print_json(doc)
        return
    now = time.time()
    state = ("bonded" if standing.bonded >= standing.min_stake else
             f"below the {eth(standing.min_stake)} a verifier needs to challenge")
    console.print(f"verifier {me}", highlight=False, soft_wrap=True)
    console.print(f"  stake                 {eth(standing.bonded)} ({state})", highlight=False, soft_wrap=True)
    if standing.unbonding:
        console.print(f"  unbonding             {eth(standing.unbonding)}, withdrawable from "
                      f"{when(standing.release_at, now)} with `unchained withdraw`", highlight=False, soft_wrap=True)
    console.print(f"  challenges raised     {len(standing.raised)}, {len(standing.open_challenges)} open",
                  highlight=False)
    for c in standing.open_challenges:
        console.print(f"    challenge {c.challenge_id} ({c.kind} {c.subject}, provider {c.provider}): {c.status}, "
                      f"bond {eth(c.bond)}", highlight=False, soft_wrap=True)
    if audits is not None:
        shown = ", ".join(f"{n} {decision.replace('_', ' ')}" for decision, n in sorted(audits.items()))
        console.print(f"  audits reported       {sum(audits.values())}" + (f" ({shown})" if shown else ""),
                      highlight=False, soft_wrap=True)
    for p in standing.owed.payable:
        console.print(f"  owed                  {p.shown()} by {p.contract} ({p.what}): `unchained withdraw`",
                      highlight=False, soft_wrap=True)
    if not standing.owed.payable:
        console.print("  owed                  nothing now", highlight=False)


def _audits(backend: str, me: str) -> dict[str, int]:
    """The verifier's reported decisions (passed, challenged, escalated, votes...) counted."""
    from collections import Counter

    from client.backend_http import BackendHttp

    http = BackendHttp(BackendHttp.client(backend, 30.0))
    rows = http.request("GET", "/disputes/reports", what="the verifier's reports",
                        params={"verifier": me.lower(), "limit": 500}).json()
    return dict(Counter(r["decision"] for r in rows))


@verifier_app.command("leave")
def leave(
    keystore: Annotated[Path, _option("KEYSTORE", "The verifier's keystore.", exists=True, dir_okay=False)],
    password_file: Annotated[Path | None, typer.Option("--password-file", dir_okay=False, help=PASSWORD_FILE_HELP)] = None,
    rpc: Rpc = DEFAULT_RPC,
    deployment: Deployment = None,
) -> None:
    """Start unbonding the whole stake; says when `unchained withdraw` can pay it out. Stop
    `unchained verifier run` first: it stakes again when it starts."""
    from client.chain import open_chain
    from client.keystore import load_keystore
    from client.units import eth, when
    from verifier.chain import VerifierChain
    from verifier.standing import read_standing

    account = load_keystore(keystore, password_file)
    _, known = open_chain(rpc, deployment_file=deployment, timeout_s=30)
    chain = VerifierChain.connect(rpc, known, account)
    before = read_standing(chain, account.address)
    if before.bonded == 0:
        waiting = (f"; {eth(before.unbonding)} unbonding, withdrawable from {when(before.release_at, chain.now())}"
                   if before.unbonding else "")
        raise VerifierError(f"verifier {account.address} has nothing bonded: nothing to unbond{waiting}")
    receipt = chain.send(chain.contract("Staking").functions.requestUnbond(before.bonded))
    after = chain.contract("Staking").functions.unbondingOf(account.address).call()
    console.print(f"unbonding {eth(before.bonded)} (tx 0x{bytes(receipt['transactionHash']).hex()}): withdrawable "
                  f"from {when(after.releaseAt, chain.now())} with `unchained withdraw`; until then it can still be "
                  "slashed", highlight=False, soft_wrap=True)
    for c in before.open_challenges:  # the contract lets it leave: they still run, and may cost it
        console.print(f"challenge {c.challenge_id} ({c.kind} {c.subject}) you raised is still {c.status}: its bond "
                      "comes back through `unchained withdraw` once it is settled (a committee finding your claim "
                      "false slashes the unbonding stake)", highlight=False, soft_wrap=True)
