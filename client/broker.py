"""Builds every party's Celery app on the broker's key layout, and manages the broker's users.

`party_celery` is the one place an app is made for talking to a queue: its messages, bindings,
unacknowledged bookkeeping and replies lie under the queue owner's key prefix (protocol.broker),
every message is signed and every consumed one checked (client.task_auth), and a `rediss://`
URL connects over TLS. `grant`/`revoke` create and remove the Redis ACL users of the parties
(`unchained broker grant|revoke`). On the embedded SQLite broker there are no prefixes and no
users: signatures are then the only defence, and anyone who can open the file reads every queue.
"""

from __future__ import annotations

import secrets
import ssl
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

import redis
from celery import Celery

from client.errors import BrokerAdminError
from client.task_auth import SignedTask, SigningAMQP, TaskAuth
from protocol.broker import (BACKEND_USER, backend_acl_rules, provider_acl_rules, provider_keyprefix, provider_user,
                             verifier_acl_rules, verifier_user)
from protocol.tasks import BadBrokerUrl, broker_transport_options, result_backend_url

_TLS_PARAMS = {"ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs"}
_CERT_REQS = {"required": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


def split_tls(broker_url: str) -> tuple[str, dict[str, Any] | None]:
    """A `rediss://` URL's TLS settings, taken out of its query (`ssl_ca_certs=FILE`,
    `ssl_certfile`, `ssl_keyfile`, `ssl_cert_reqs=required|optional|none`; default: the server's
    certificate must verify against the system's or the given CA). Other URLs: unchanged, None."""
    if not broker_url.startswith("rediss://"):
        return broker_url, None
    parts = urlsplit(broker_url)
    query = parse_qsl(parts.query)
    unknown = {k for k, _ in query} - _TLS_PARAMS
    if unknown:
        raise BadBrokerUrl(f"unknown broker URL parameters: {', '.join(sorted(unknown))}")
    options: dict[str, Any] = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    for key, value in query:
        if key == "ssl_cert_reqs":
            if value not in _CERT_REQS:
                raise BadBrokerUrl(f"ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}: {value!r}")
            options[key] = _CERT_REQS[value]
        else:
            options[key] = value
    return urlunsplit(parts._replace(query="")), options


def celery_settings(broker_url: str, keyprefix: str, *, results: bool = True,
                    visibility_timeout_s: int | None = None, max_retries: int | None = None) -> dict[str, Any]:
    """Celery settings for talking to the queue whose keys lie under `keyprefix` (ignored on a
    SQLite broker, which has no key names)."""
    url, tls = split_tls(broker_url)
    is_redis = url.startswith(("redis://", "rediss://"))
    transport = broker_transport_options(url, visibility_timeout_s=visibility_timeout_s, max_retries=max_retries)
    settings: dict[str, Any] = {"broker_url": url, "task_serializer": "json", "result_serializer": "json",
                                "accept_content": ["json"],
                                # Remote control (broadcast shutdown, rate limits, ...) is a channel
                                # any party would share: off; and kombu listens on it by PSUBSCRIBE,
                                # whose pattern an ACL matches literally, not as a glob.
                                "worker_enable_remote_control": False}
    if is_redis:
        transport["global_keyprefix"] = keyprefix
        settings["result_backend_transport_options"] = {"global_keyprefix": keyprefix}
    settings["broker_transport_options"] = transport
    if results:
        settings["result_backend"] = result_backend_url(url)
    if tls is not None:
        settings["broker_use_ssl"] = tls
        settings["redis_backend_use_ssl"] = tls
    return settings


def signed_celery(name: str, auth: Callable[[], TaskAuth]) -> Celery:
    """An app (not configured yet) whose tasks are signed and checked with `auth()`."""
    app = Celery(name, amqp=SigningAMQP, task_cls=SignedTask, set_as_current=False)
    app.unchained_auth = auth  # read by client.task_auth.auth_of
    return app


def party_celery(name: str, broker_url: str, keyprefix: str, auth: Callable[[], TaskAuth], *,
                 results: bool = True, max_retries: int | None = None, **extra: Any) -> Celery:
    """A configured, signing app for the queue under `keyprefix`; `max_retries`: kombu's
    connection retries; `extra`: more Celery settings."""
    app = signed_celery(name, auth)
    settings = celery_settings(broker_url, keyprefix, results=results, max_retries=max_retries)
    for key, value in extra.items():  # option dicts are merged: the key prefix stays
        settings[key] = {**settings[key], **value} if isinstance(settings.get(key), dict) else value
    app.conf.update(settings)
    return app


# -- users ---------------------------------------------------------------------------------------


def _rules(role: str, address: str | None) -> tuple[str, list[str]]:
    if role == "provider" and address:
        return provider_user(address), provider_acl_rules(address)
    if role == "verifier" and address:
        return verifier_user(address), verifier_acl_rules(address)
    if role == "backend":
        return BACKEND_USER, backend_acl_rules()
    raise BrokerAdminError(f"no such party: {role} {address or ''}".strip())


def _admin(admin_url: str) -> redis.Redis:
    url, tls = split_tls(admin_url)
    if not url.startswith(("redis://", "rediss://")):
        raise BrokerAdminError(f"users exist on a Redis broker only, not on {url.split(':', 1)[0]}")
    kwargs: dict[str, Any] = dict(tls or {})
    return redis.Redis.from_url(url, socket_timeout=5, **kwargs)


def user_url(public_url: str, user: str, password: str) -> str:
    """`public_url` (what the party dials, TLS query included) with the user's credentials."""
    parts = urlsplit(public_url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"))


def grant(admin_url: str, role: str, address: str | None = None, public_url: str | None = None) -> str:
    """Creates (or resets, with a new password) the party's ACL user; returns its broker URL.
    A reset closes every connection the user opened before: whoever held the old URL is out
    (the old password is gone first, so none can log in between)."""
    user, rules = _rules(role, address)
    password = secrets.token_urlsafe(24)
    client = _admin(admin_url)
    try:
        client.execute_command("ACL", "SETUSER", user, *rules, f">{password}")  # `reset` drops old passwords
        client.execute_command("CLIENT", "KILL", "USER", user)
        _save(client)
    except redis.RedisError as exc:
        raise BrokerAdminError(f"broker refused to create {user}: {exc}") from exc
    finally:
        client.close()
    return user_url(public_url or admin_url, user, password)


def revoke(admin_url: str, role: str, address: str | None = None) -> bool:
    """Removes the party's user (Redis closes its connections); False if there was none."""
    user, _ = _rules(role, address)
    client = _admin(admin_url)
    try:
        if not client.execute_command("ACL", "DELUSER", user):
            return False
        _save(client)
        return True
    except redis.RedisError as exc:
        raise BrokerAdminError(f"broker refused to remove {user}: {exc}") from exc
    finally:
        client.close()


def _save(client: redis.Redis) -> None:
    """Writes the users to the server's ACL file when it has one (else they live until restart)."""
    try:
        client.execute_command("ACL", "SAVE")
    except redis.ResponseError as exc:
        if "ACL file" not in str(exc):
            raise


class QueueApps:
    """A sender's signing apps, one per provider queue (each on that provider's key prefix, with
    that provider's replies), made on first use."""

    def __init__(self, name: str, broker_url: str, auth: Callable[[], TaskAuth], *, results: bool,
                 max_retries: int | None = None, **extra: Any) -> None:
        self.name, self.broker_url, self.auth, self.results, self.extra = name, broker_url, auth, results, extra
        self.max_retries = max_retries
        celery_settings(broker_url, "", results=results)  # a bad URL fails here, not at the first send
        self._apps: dict[str, Celery] = {}
        self._lock = threading.Lock()

    def for_provider(self, address: str) -> Celery:
        key = provider_keyprefix(address)
        with self._lock:
            if key not in self._apps:
                self._apps[key] = party_celery(self.name, self.broker_url, key, self.auth, results=self.results,
                                               max_retries=self.max_retries, **self.extra)
            return self._apps[key]
