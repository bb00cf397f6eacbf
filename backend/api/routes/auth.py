from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query, status
from web3 import Web3

from backend import auth
from backend.api.deps import BackendDep, BearerDep, DbDep, SignedInDep
from backend.api.schemas import ADDRESS_PATTERN, LoginRequest, Me, NonceIssued, SessionPublic, SiweMessageIssued
from protocol.siwe import SiweMessage

router = APIRouter(prefix="/auth", tags=["auth"])


@router.get("/nonce", response_model=NonceIssued)
def nonce(backend: BackendDep, db: DbDep) -> NonceIssued:
    """A single-use nonce for an EIP-4361 message, with the domain, URI and chain id it must name."""
    value, expires = auth.issue_nonce(db, backend.settings)
    return NonceIssued(nonce=value, expires_at=expires, domain=backend.settings.siwe_domain,
                       uri=backend.settings.siwe_uri, chain_id=backend.chain().deployment.chain_id)


@router.get("/message", response_model=SiweMessageIssued)
def message(
    address: Annotated[str, Query(pattern=ADDRESS_PATTERN)], backend: BackendDep, db: DbDep,
) -> SiweMessageIssued:
    """A ready EIP-4361 message with a fresh nonce, for wallets that sign text as given (the
    browser dashboard). Signing it proves nothing until POST /auth/login verifies it in full."""
    value, _expires = auth.issue_nonce(db, backend.settings)
    now = datetime.now(UTC).replace(microsecond=0)
    text = SiweMessage(
        domain=backend.settings.siwe_domain, address=Web3.to_checksum_address(address), uri=backend.settings.siwe_uri,
        chain_id=backend.chain().deployment.chain_id, nonce=value, issued_at=now,
        expiration_time=now + timedelta(seconds=backend.settings.nonce_ttl_s),
        statement="Sign in to the Unchained marketplace.",
    ).text()
    return SiweMessageIssued(message=text, nonce=value)


@router.post("/login", response_model=SessionPublic, responses={401: {}, 422: {}})
def login(body: LoginRequest, backend: BackendDep, db: DbDep) -> SessionPublic:
    """Exchanges a signed sign-in message for a bearer session token."""
    issued = auth.login(db, backend.settings, backend.chain().deployment.chain_id, body.message, body.signature)
    return SessionPublic(token=issued.token, address=issued.address, expires_at=issued.expires_at)


@router.get("/me", response_model=Me, responses={401: {}})
def me(address: SignedInDep) -> Me:
    return Me(address=address)


@router.post("/logout", status_code=status.HTTP_204_NO_CONTENT, responses={401: {}})
def logout(address: SignedInDep, credentials: BearerDep, backend: BackendDep, db: DbDep) -> None:
    if credentials is not None:
        auth.logout(db, backend.settings, credentials.credentials, backend.sessions)
