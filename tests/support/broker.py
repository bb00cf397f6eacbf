"""Broker senders for tests: Celery apps that sign tasks with a development key, as the
dispatcher, a verifier or a provider would (client.task_auth)."""

from __future__ import annotations

from typing import Any

from client.broker import QueueApps
from client.task_auth import TaskAuth, domain_of
from tests.support.accounts import dev_account
from tests.support.provider_market import Market


def signed_sender(broker_url: str, market: Market, index: int) -> QueueApps:
    """Celery senders to providers' queues that sign with development key `index` (the worker
    runs only what that key may send: client.task_auth)."""
    auth = TaskAuth(domain_of(market.session.deployment), dev_account(index))
    return QueueApps("test-sender", broker_url, lambda: auth, results=True)


def signed_result(apps: QueueApps, provider: str, result: Any, timeout: float) -> Any:
    """The reply to a task sent with `apps`, checked to be signed by `provider` for that task."""
    return apps.for_provider(provider).unchained_auth().open_reply(result.id, result.get(timeout=timeout), [provider])


__all__ = ["signed_result", "signed_sender"]
