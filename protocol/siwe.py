"""Sign-In with Ethereum (EIP-4361) messages: building and strict parsing, no I/O.

Clients (the renter CLI, the provider agent, a browser wallet) build the message, the backend
parses it; both sides must agree on the exact text because the wallet signs it with
`personal_sign` (EIP-191). Only the fields the backend relies on are supported: domain,
address, statement, URI, version 1, chain id, nonce, issued-at and a mandatory expiration time
(a message without an expiry could be replayed forever if its nonce store were lost).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from eth_utils import is_checksum_address

from protocol.errors import ProtocolError

MAX_MESSAGE_BYTES = 4096
_HEADER = " wants you to sign in with your Ethereum account:"
_NONCE = re.compile(r"^[A-Za-z0-9]{8,64}$")
_DOMAIN = re.compile(r"^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$")
_FIELDS = ("URI", "Version", "Chain ID", "Nonce", "Issued At", "Expiration Time")


class SiweError(ProtocolError):
    """A sign-in message does not follow EIP-4361 (as supported here); the text says where."""


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(name: str, value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise SiweError(f"{name}: not an RFC 3339 time: {value!r}") from exc
    if moment.tzinfo is None:
        raise SiweError(f"{name}: a time zone is required")
    return moment


@dataclass(frozen=True)
class SiweMessage:
    domain: str
    address: str  # EIP-55 checksummed
    uri: str
    chain_id: int
    nonce: str
    issued_at: datetime
    expiration_time: datetime
    statement: str = ""

    def text(self) -> str:
        """The exact text the wallet signs."""
        lines = [f"{self.domain}{_HEADER}", self.address, ""]
        if self.statement:
            lines += [self.statement, ""]
        else:
            lines += [""]
        lines += [
            f"URI: {self.uri}",
            "Version: 1",
            f"Chain ID: {self.chain_id}",
            f"Nonce: {self.nonce}",
            f"Issued At: {_rfc3339(self.issued_at)}",
            f"Expiration Time: {_rfc3339(self.expiration_time)}",
        ]
        return "\n".join(lines)

    @classmethod
    def parse(cls, text: str) -> SiweMessage:
        """Parses untrusted text; raises SiweError unless it is exactly what text() produces."""
        if len(text.encode()) > MAX_MESSAGE_BYTES:
            raise SiweError(f"message is longer than {MAX_MESSAGE_BYTES} bytes")
        lines = text.split("\n")
        if len(lines) < 10 or not lines[0].endswith(_HEADER):
            raise SiweError("first line must be '<domain> wants you to sign in with your Ethereum account:'")
        domain = lines[0][: -len(_HEADER)]
        if not _DOMAIN.match(domain):
            raise SiweError(f"domain: {domain!r} is not a host[:port]")
        address = lines[1]
        if not is_checksum_address(address):
            raise SiweError("address: expected an EIP-55 checksummed address")
        if lines[2] != "":
            raise SiweError("an empty line must follow the address")
        if lines[3] == "":
            statement, rest = "", lines[4:]
        else:
            if lines[4] != "":
                raise SiweError("an empty line must follow the statement")
            statement, rest = lines[3], lines[5:]
        if len(rest) != len(_FIELDS):
            raise SiweError(f"expected the fields {', '.join(_FIELDS)}, one per line")
        values = {}
        for name, line in zip(_FIELDS, rest, strict=True):
            prefix = f"{name}: "
            if not line.startswith(prefix):
                raise SiweError(f"expected '{prefix}…', got {line[:40]!r}")
            values[name] = line[len(prefix):]
        if values["Version"] != "1":
            raise SiweError(f"Version: {values['Version']!r}; only 1 is defined")
        if not values["Chain ID"].isdigit():
            raise SiweError("Chain ID: expected a decimal integer")
        if not _NONCE.match(values["Nonce"]):
            raise SiweError("Nonce: expected 8 to 64 letters or digits")
        message = cls(
            domain=domain,
            address=address,
            statement=statement,
            uri=values["URI"],
            chain_id=int(values["Chain ID"]),
            nonce=values["Nonce"],
            issued_at=_parse_time("Issued At", values["Issued At"]),
            expiration_time=_parse_time("Expiration Time", values["Expiration Time"]),
        )
        if message.text() != text:
            raise SiweError("message is not in canonical form (times must be UTC 'YYYY-MM-DDTHH:MM:SSZ')")
        return message


SIGN_IN_STATEMENT = "Sign in to the Unchained marketplace."


def domain_of(base_url: str) -> str:
    """The EIP-4361 domain (host[:port]) of a server URL, as the backend derives its own from
    its public URL: a client signs only for the domain it is actually talking to, so that a
    hostile server cannot relay the signature to log in elsewhere."""
    return urlsplit(base_url).netloc


def login_message(domain: str, address: str, uri: str, chain_id: int, nonce: str, lifetime_s: int,
                  now: datetime | None = None, statement: str = SIGN_IN_STATEMENT) -> SiweMessage:
    """The message a client signs for `POST /auth/login`, from the fields `GET /auth/nonce`
    returned; it expires `lifetime_s` after `now` (default: the current second, UTC)."""
    issued = (now or datetime.now(UTC)).replace(microsecond=0)
    return SiweMessage(domain=domain, address=address, uri=uri, chain_id=chain_id, nonce=nonce, issued_at=issued,
                       expiration_time=issued + timedelta(seconds=lifetime_s), statement=statement)
