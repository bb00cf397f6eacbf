"""Sign-In with Ethereum sessions.

1. `issue_nonce`: a fresh random nonce with a short lifetime, stored server-side.
2. The wallet signs an EIP-4361 message naming our domain, URI, chain id and that nonce
   (EIP-191 personal_sign; eth-account's `encode_defunct`).
3. `login`: the message is parsed strictly, its fields checked, the signer recovered, and the
   nonce consumed with one conditional UPDATE: a second login with the same message finds it
   used and is rejected (replay), even when both arrive at once.
4. The session token is random; only its HMAC is stored, so a database leak yields no session.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from eth_account import Account
from eth_account.messages import encode_defunct
from sqlalchemy import CursorResult, delete, update
from sqlalchemy.orm import Session

from backend import models as m
from backend.errors import BadInput, Unauthenticated
from backend.settings import Settings
from protocol.siwe import SiweError, SiweMessage

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


def _aware(moment: datetime) -> datetime:
    """SQLite returns naive datetimes for timezone-aware columns; they were stored as UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class IssuedSession:
    token: str
    address: str  # lower-case
    expires_at: datetime


def issue_nonce(session: Session, settings: Settings) -> tuple[str, datetime]:
    nonce = secrets.token_hex(16)
    expires = utcnow() + timedelta(seconds=settings.nonce_ttl_s)
    session.execute(delete(m.SiweNonce).where(m.SiweNonce.expires_at < utcnow() - timedelta(days=1)))
    session.add(m.SiweNonce(nonce=nonce, expires_at=expires, used=False))
    session.commit()
    return nonce, expires


def _token_hash(settings: Settings, token: str) -> str:
    return hmac.new(settings.session_secret.encode(), token.encode(), hashlib.sha256).hexdigest()


def login(session: Session, settings: Settings, chain_id: int, text: str, signature: str) -> IssuedSession:
    """Verifies a signed sign-in message and opens a session for its signer."""
    try:
        message = SiweMessage.parse(text)
    except SiweError as exc:
        raise BadInput(f"sign-in message: {exc}") from exc
    now = utcnow()
    if message.domain != settings.siwe_domain or message.uri != settings.siwe_uri:
        raise Unauthenticated(f"message is for {message.domain} ({message.uri}), not {settings.siwe_domain}")
    if message.chain_id != chain_id:
        raise Unauthenticated(f"message is for chain {message.chain_id}, this backend serves chain {chain_id}")
    if message.expiration_time <= now:
        raise Unauthenticated("message has expired")
    if message.issued_at > now + timedelta(minutes=5):
        raise Unauthenticated("message is issued in the future")
    try:
        signer = Account.recover_message(encode_defunct(text=text), signature=signature)
    except Exception as exc:  # eth-account raises several types for malformed signatures
        raise Unauthenticated(f"signature does not recover: {exc}") from exc
    if signer != message.address:
        raise Unauthenticated("signature is not by the message's address")
    consumed = cast(CursorResult[Any], session.execute(
        update(m.SiweNonce)
        .where(m.SiweNonce.nonce == message.nonce, m.SiweNonce.used.is_(False), m.SiweNonce.expires_at > now)
        .values(used=True)
    )).rowcount
    if consumed != 1:
        session.rollback()
        raise Unauthenticated("nonce is unknown, expired or already used")
    token = secrets.token_urlsafe(32)
    expires = min(now + timedelta(seconds=settings.session_ttl_s), message.expiration_time)
    address = message.address.lower()
    session.add(m.AuthSession(token_hash=_token_hash(settings, token), address=address, expires_at=expires))
    session.commit()
    log.info("session opened for %s until %s", address, expires.isoformat())
    return IssuedSession(token=token, address=address, expires_at=expires)


class SessionCache:
    """Live sessions this process has looked up, by their token's hash: a signed-in request then
    costs no database query (each was a trip to the thread pool and a query, 8% of the backend's
    Python time under load). An entry is trusted for at most `max_age_s`: a logout through another
    backend process on the same database ends the session here within that time (through this
    process, at once). `max_age_s` 0: every request asks the database."""

    def __init__(self, settings: Settings, max_age_s: float, capacity: int = 10_000) -> None:
        self.settings = settings
        self.max_age_s = max_age_s
        self.capacity = capacity
        self._entries: OrderedDict[str, tuple[str, datetime, float]] = OrderedDict()
        self._lock = threading.Lock()

    def key(self, token: str) -> str:
        return _token_hash(self.settings, token)

    def address(self, token: str) -> str | None:
        """The session's address when this process saw it live lately, else None (ask the database)."""
        key = self.key(token)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            address, expires_at, trusted_until = entry
            if time.monotonic() < trusted_until and utcnow() < expires_at:
                return address
            del self._entries[key]
            return None

    def keep(self, key: str, address: str, expires_at: datetime) -> None:
        if self.max_age_s <= 0:
            return
        with self._lock:
            self._entries[key] = (address, expires_at, time.monotonic() + self.max_age_s)
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def drop(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)


def authenticate(session: Session, settings: Settings, token: str, cache: SessionCache | None = None) -> str:
    """The lower-case address of a live session token (kept in `cache` when given)."""
    key = _token_hash(settings, token)
    row = session.get(m.AuthSession, key)
    if row is None or _aware(row.expires_at) <= utcnow():
        raise Unauthenticated("session is unknown or expired: sign in again")
    if cache is not None:
        cache.keep(key, row.address, _aware(row.expires_at))
    return row.address


def logout(session: Session, settings: Settings, token: str, cache: SessionCache | None = None) -> None:
    key = _token_hash(settings, token)
    if cache is not None:
        cache.drop(key)
    session.execute(delete(m.AuthSession).where(m.AuthSession.token_hash == key))
    session.commit()
