"""`unchained broker grant|revoke`: the operator's Redis ACL users for providers, verifiers and
the backend (client.broker; the rules in protocol.broker). Run against the broker with an admin
user; the printed URL is what the party passes as its --broker."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from client import ClientError
from client.broker import grant, revoke
from protocol.tasks import BadAddress, BadBrokerUrl

broker_app = typer.Typer(help="Broker users: each party reaches only its own queue's keys (Redis ACLs).",
                         no_args_is_help=True)
console = Console()

AdminUrl = Annotated[str, typer.Option(
    "--admin-url", envvar="UNCHAINED_BROKER_ADMIN_URL",
    help="The broker as its admin (redis[s]://admin:PASSWORD@HOST:PORT/0[?ssl_ca_certs=FILE]).")]
Provider = Annotated[Optional[str], typer.Option(help="A provider's address: rights on its own queue only.")]
Verifier = Annotated[Optional[str], typer.Option(help="A verifier's address: its own keys, and pushing PoG "
                                                      "tasks to providers' queues and reading their replies.")]
Backend = Annotated[bool, typer.Option("--backend", help="The backend's user: pushing to providers' queues only.")]


def _party(provider: str | None, verifier: str | None, backend: bool) -> tuple[str, str | None]:
    chosen = [(role, value) for role, value in (("provider", provider), ("verifier", verifier),
                                                ("backend", backend or None)) if value]
    if len(chosen) != 1:
        raise typer.BadParameter("name exactly one of --provider ADDR, --verifier ADDR, --backend")
    role, value = chosen[0]
    return role, value if isinstance(value, str) else None


@broker_app.command("grant")
def grant_command(
    admin_url: AdminUrl = "redis://127.0.0.1:6379/0",
    provider: Provider = None,
    verifier: Verifier = None,
    backend: Backend = False,
    public_url: Annotated[Optional[str], typer.Option(
        help="The broker as the party reaches it (host, port, TLS query); default: --admin-url's.")] = None,
) -> None:
    """Create (or reset, with a new password) a party's broker user and print its broker URL."""
    role, address = _party(provider, verifier, backend)
    try:
        url = grant(admin_url, role, address, public_url)
    except (ClientError, BadAddress, BadBrokerUrl) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True, highlight=False)
        raise typer.Exit(1) from exc
    print(url)  # plain: scripts capture it; it holds a password, so only stdout, never a log


@broker_app.command("revoke")
def revoke_command(
    admin_url: AdminUrl = "redis://127.0.0.1:6379/0",
    provider: Provider = None,
    verifier: Verifier = None,
    backend: Backend = False,
) -> None:
    """Remove a party's broker user; its open connections are closed."""
    role, address = _party(provider, verifier, backend)
    try:
        removed = revoke(admin_url, role, address)
    except (ClientError, BadAddress, BadBrokerUrl) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True, highlight=False)
        raise typer.Exit(1) from exc
    console.print("revoked" if removed else "no such user", highlight=False)
