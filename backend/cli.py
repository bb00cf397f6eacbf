"""Typer sub-app of the backend: `backend` (serve, index, rebuild)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from backend.settings import Settings

console = Console()
backend_app = typer.Typer(help="The marketplace backend: API, dashboard, chain indexer.", no_args_is_help=True)


ServeRpc = Annotated[str | None, typer.Option(
    "--rpc", envvar="UNCHAINED_BACKEND_RPC_URL", help="JSON-RPC URL of the chain to index; default: $UNCHAINED_BACKEND_RPC_URL, else http://127.0.0.1:8545.")]
Database = Annotated[str | None, typer.Option(
    "--database", envvar="UNCHAINED_BACKEND_DATABASE_URL", help="SQLAlchemy URL (sqlite:///FILE, postgresql+psycopg://...); default: "
                       "sqlite in the data directory.")]
DataDir = Annotated[Path | None, typer.Option(
    "--data-dir", envvar="UNCHAINED_BACKEND_DATA_DIR", file_okay=False, help="Database and uploaded blobs; default: ~/.unchained/<chainId>/backend.")]
Broker = Annotated[str | None, typer.Option(
    "--broker", envvar="UNCHAINED_BACKEND_BROKER_URL", help="Celery broker URL the funded jobs are queued on (redis://... or sqla+sqlite:///FILE); "
                     "default: $UNCHAINED_BACKEND_BROKER_URL, else redis://127.0.0.1:6379/0.")]
ServeDeployment = Annotated[Path | None, typer.Option(
    "--deployment", envvar="UNCHAINED_BACKEND_DEPLOYMENT_FILE", dir_okay=False, help="deployments/<chainId>.json; default: ./deployments/<chainId>.json.")]


def _backend_settings(rpc: str | None = None, database: str | None = None, data_dir: Path | None = None,
                      broker: str | None = None, deployment: Path | None = None, **more: object) -> Settings:
    """Environment (UNCHAINED_BACKEND_*) first, flags over it; the data directory per network.
    The node must answer: the database's place and the deployment depend on its chain id."""
    from backend.chain import Chain
    from protocol.tasks import BadBrokerUrl, result_backend_url

    flags = {"rpc_url": rpc, "database_url": database, "data_dir": data_dir, "broker_url": broker,
             "deployment_file": deployment, **more}
    settings = Settings.from_env(None, **{k: v for k, v in flags.items() if v is not None})
    if settings.dispatch:
        try:
            result_backend_url(settings.broker_url)
        except (BadBrokerUrl, ValueError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--broker") from exc
    if not settings.run_indexer and settings.data_dir is not None:
        return settings  # the API alone, over a database already placed: no node needed
    chain = Chain.connect(settings)  # one line when the node is down (ChainUnavailable), no retry loop
    return settings.for_network(chain.deployment.chain_id)


@backend_app.command("serve")
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = 8000,
    index: Annotated[bool, typer.Option(help="Follow the chain in the background (--no-index with --data-dir: "
                                             "serve the stored index without a node).")] = True,
    rpc: ServeRpc = None,
    database: Database = None,
    data_dir: DataDir = None,
    broker: Broker = None,
    deployment: ServeDeployment = None,
    public_url: Annotated[str | None, typer.Option(
        envvar="UNCHAINED_BACKEND_PUBLIC_URL", help="URL clients reach this server at (sign-in domain, result links); default: http://HOST:PORT.")] = None,
) -> None:
    """Serve the API (OpenAPI at /docs) and the dashboard at /, indexing the chain."""
    import uvicorn

    from backend.api.app import create_app

    settings = _backend_settings(rpc, database, data_dir, broker, deployment, public_url=public_url,
                                 run_indexer=index)
    settings = settings.with_listen_address(host, port)
    logging.basicConfig(level=logging.INFO, force=True, format="%(asctime)s %(levelname)s:%(name)s:%(message)s")
    console.print(f"backend at {settings.base_url} (API docs {settings.base_url}/docs), chain {settings.rpc_url}, "
                  f"database {settings.db_url}", soft_wrap=True, highlight=False)
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info")


@backend_app.command("index")
def index_once(rpc: ServeRpc = None, database: Database = None, data_dir: DataDir = None, broker: Broker = None,
               deployment: ServeDeployment = None) -> None:
    """Apply every confirmed block once and exit (cron-style indexing)."""
    from backend.runtime import Backend

    backend = Backend.open(_backend_settings(rpc, database, data_dir, broker, deployment))
    try:
        count = backend.make_indexer().sync()
        console.print(f"{count} new events; indexed up to block {backend.make_indexer().cursor()}")
    finally:
        backend.close()


@backend_app.command("rebuild")
def rebuild_command(rpc: ServeRpc = None, database: Database = None, data_dir: DataDir = None,
                    deployment: ServeDeployment = None) -> None:
    """Empty the chain tables and rebuild them from contract events alone."""
    from backend.indexer import rebuild
    from backend.runtime import Backend

    backend = Backend.open(_backend_settings(rpc, database, data_dir, None, deployment, dispatch=False))
    try:
        console.print(f"rebuilt from {rebuild(backend.make_indexer())} events")
    finally:
        backend.close()


__all__ = ["backend_app"]
