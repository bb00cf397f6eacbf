"""`unchained verifier ...`: the verifier service (mounted by the root app)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer
from prometheus_client import start_http_server
from rich.console import Console
from web3 import Web3

from client import ClientError
from client.keystore import PASSWORD_FILE_HELP, load_keystore
from protocol.deployments import Deployment, DeploymentFormatError
from protocol.tasks import BadBrokerUrl
from verifier import VerifierError
from verifier.backend_client import VerifierBackend
from verifier.chain import VerifierChain
from verifier.committee import CommitteeMember
from verifier.job_audit import JobAuditor, JobReexecutor
from verifier.links import CeleryProverLink, make_celery
from verifier.reexec import ReexecLimits
from verifier.service import VerifierService
from verifier.settings import Settings

verifier_app = typer.Typer(help="Verifier: stake, run Proof-of-GPU rounds, challenge and slash cheaters.",
                           no_args_is_help=True)
console = Console()


@verifier_app.callback()
def verifier() -> None:
    """Verifier: stake, run Proof-of-GPU rounds, challenge and slash cheaters."""


def _deployment(rpc: str, path: Path | None) -> Deployment:
    if path is None:
        path = Path("deployments") / f"{Web3(Web3.HTTPProvider(rpc)).eth.chain_id}.json"
    try:
        return Deployment.from_json(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError, DeploymentFormatError) as exc:
        raise VerifierError(f"cannot read deployment {path}: {exc}") from exc


@verifier_app.command("run")
def run(
    rpc: Annotated[str | None, typer.Option(help="JSON-RPC URL.")] = None,
    keystore: Annotated[Path | None, typer.Option(exists=True, dir_okay=False, help="The verifier's keystore.")] = None,
    password_file: Annotated[Path | None, typer.Option("--password-file", dir_okay=False, help=PASSWORD_FILE_HELP)] = None,
    broker: Annotated[str | None, typer.Option(help="Celery broker URL (redis://... or sqla+sqlite:///path).")] = None,
    backend: Annotated[str | None, typer.Option(help="Backend URL: jobs to audit and vote on.")] = None,
    deployment: Annotated[Path | None, typer.Option(help="deployments/<chainId>.json")] = None,
) -> None:
    """Stake if needed, then run rounds and follow challenges until interrupted."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    overrides = {k: v for k, v in {"rpc_url": rpc, "keystore": keystore, "password_file": password_file,
                                   "broker_url": broker, "backend_url": backend,
                                   "deployment_file": deployment}.items() if v is not None}
    try:
        settings = Settings.from_env(**overrides)
        if settings.keystore is None:
            raise VerifierError("a verifier signs with its own key: pass --keystore")
        account = load_keystore(settings.keystore, settings.password_file)
        chain = VerifierChain.connect(settings.rpc_url, _deployment(settings.rpc_url, settings.deployment_file), account)
        try:
            app = make_celery(settings.broker_url)
        except BadBrokerUrl as exc:
            raise VerifierError(str(exc)) from exc
        auditor = committee = None
        if settings.backend_url:
            backend_client = VerifierBackend(settings.backend_url, account)
            limits = ReexecLimits(settings.reexec_memory_bytes, settings.reexec_timeout_s)
            reexec = JobReexecutor(backend_client, limits, settings.work_dir)
            auditor = JobAuditor(chain, backend_client, reexec, max_attempts=settings.audit_attempts,
                                 backoff_s=settings.audit_backoff_s)
            committee = CommitteeMember(chain, backend_client, reexec)
        service = VerifierService(chain, settings, lambda provider: CeleryProverLink(app, provider),
                                  auditor=auditor, committee=committee)
        if settings.metrics_port:
            start_http_server(settings.metrics_port, registry=service.metrics.registry)
        console.print(f"verifier {account.address} on {settings.rpc_url}; stake {service.ensure_staked()} wei")
        service.run_forever()
    except (VerifierError, ClientError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    except KeyboardInterrupt:
        console.print("stopped")
