"""Typed messages (EIP-712) that hand a lease's machine to its renter. Pure: no I/O.

Two messages, both bound to one lease of one LeaseManager on one chain (the EIP-712 domain):

- `LeaseKey`: the renter's wallet signs the SSH public key it will log in with and the image its
  machine boots (the keccak256 of a root file system tarball the renter uploaded, or zero for the
  provider's default). The provider accepts that key and image for that lease and no other, and
  only when the signer is the lease's renter on-chain, so nobody else (not the backend that
  relays them) can put a key or an image on a lease.
- `LeaseAccess`: the provider signs where the lease's machine answers (host, port, user, the SSH
  host key's SHA-256 fingerprint). The renter checks the signer against the lease's provider and
  pins the host key; the provider binds the message's EIP-712 hash on-chain
  (`LeaseManager.offerAccess`), and the renter, once it logged in against that host key,
  confirms the same hash (`LeaseManager.confirmDelivery`): until it does, or its confirm window
  passes, the renter may cancel for a full refund (docs/PROTOCOL.md, "Lease delivery").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils import keccak, to_checksum_address

from protocol.errors import ProtocolError

DOMAIN_NAME = "Unchained LeaseManager"
DOMAIN_VERSION = "1"
MAX_SSH_KEY_BYTES = 8192
# One OpenSSH public key line: type, base64 blob, optional comment (no options, no newlines).
_SSH_KEY = re.compile(r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com"
                      r"|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [\x21-\x7e][\x20-\x7e]*)?$")
_HOST = re.compile(r"^[A-Za-z0-9.\-:\[\]]{1,253}$")
_USER = re.compile(r"^[a-z_][a-z0-9_\-]{0,31}$")
_FINGERPRINT = re.compile(r"^SHA256:[A-Za-z0-9+/]{43}$")
_HASH = re.compile(r"^0x[0-9a-f]{64}$")
NO_IMAGE = "0x" + "00" * 32  # the lease boots the provider's default root file system

_TYPES: dict[str, list[dict[str, str]]] = {
    "LeaseKey": [{"name": "leaseId", "type": "uint256"}, {"name": "sshPublicKey", "type": "string"},
                 {"name": "image", "type": "bytes32"}],
    "LeaseAccess": [{"name": "leaseId", "type": "uint256"}, {"name": "host", "type": "string"},
                    {"name": "port", "type": "uint16"}, {"name": "user", "type": "string"},
                    {"name": "hostKeyFingerprint", "type": "string"}],
}


class LeaseMessageError(ProtocolError):
    """A lease message is malformed or not signed by the party it must come from."""


@dataclass(frozen=True)
class LeaseDomain:
    chain_id: int
    lease_manager: str  # the LeaseManager's address: a signature for one deployment is void in another

    def to_json(self) -> dict[str, Any]:
        return {"name": DOMAIN_NAME, "version": DOMAIN_VERSION, "chainId": self.chain_id,
                "verifyingContract": to_checksum_address(self.lease_manager)}


def normalize_ssh_key(text: str) -> str:
    """The one-line public key (`ssh-ed25519 AAAA... comment`) or LeaseMessageError: a private key,
    several keys or authorized_keys options are refused (options could widen what the key may do)."""
    line = text.strip()
    if len(line.encode()) > MAX_SSH_KEY_BYTES:
        raise LeaseMessageError(f"SSH public key: longer than {MAX_SSH_KEY_BYTES} bytes")
    if "PRIVATE KEY" in line:
        raise LeaseMessageError("SSH public key: this is a private key; give the .pub file")
    if not _SSH_KEY.match(line):
        raise LeaseMessageError("SSH public key: expected one line 'TYPE BASE64 [comment]' "
                                "(e.g. ~/.ssh/id_ed25519.pub from `ssh-keygen -t ed25519`)")
    return line


@dataclass(frozen=True)
class LeaseKey:
    lease_id: int
    ssh_public_key: str
    image: str = NO_IMAGE  # keccak256 of the renter's root file system tarball (0x + 64 lower-case hex)

    def __post_init__(self) -> None:
        if not 0 < self.lease_id < 2**256:
            raise LeaseMessageError(f"leaseId {self.lease_id}: out of range")
        if normalize_ssh_key(self.ssh_public_key) != self.ssh_public_key:
            raise LeaseMessageError("SSH public key: not in its one-line form")
        if not _HASH.match(self.image):
            raise LeaseMessageError(f"image {self.image!r}: expected a content hash, 0x and 64 lower-case hex digits")

    @property
    def has_image(self) -> bool:
        return self.image != NO_IMAGE

    def message(self) -> dict[str, Any]:
        return {"leaseId": self.lease_id, "sshPublicKey": self.ssh_public_key, "image": self.image}


@dataclass(frozen=True)
class LeaseAccess:
    lease_id: int
    host: str
    port: int
    user: str
    host_key_fingerprint: str  # `ssh-keygen -l -E sha256`: SHA256:<43 base64 chars>

    def __post_init__(self) -> None:
        if not 0 < self.lease_id < 2**256:
            raise LeaseMessageError(f"leaseId {self.lease_id}: out of range")
        if not _HOST.match(self.host):
            raise LeaseMessageError(f"host {self.host!r}: not a host name or address")
        if not 0 < self.port < 65536:
            raise LeaseMessageError(f"port {self.port}: not a TCP port")
        if not _USER.match(self.user):
            raise LeaseMessageError(f"user {self.user!r}: not a login name")
        if not _FINGERPRINT.match(self.host_key_fingerprint):
            raise LeaseMessageError(f"host key fingerprint {self.host_key_fingerprint!r}: expected SHA256:<base64>")

    def message(self) -> dict[str, Any]:
        return {"leaseId": self.lease_id, "host": self.host, "port": self.port, "user": self.user,
                "hostKeyFingerprint": self.host_key_fingerprint}

    def ssh_command(self) -> list[str]:
        """The ssh argv that reaches the lease (the caller adds -i and the host key pin)."""
        return ["ssh", "-p", str(self.port), f"{self.user}@{self.host}"]

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "LeaseAccess":
        try:
            return cls(int(doc["leaseId"]), str(doc["host"]), int(doc["port"]), str(doc["user"]),
                       str(doc["hostKeyFingerprint"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise LeaseMessageError(f"lease access: missing or malformed field ({exc})") from exc


def _typed(domain: LeaseDomain, what: LeaseKey | LeaseAccess) -> Any:
    primary = type(what).__name__
    return encode_typed_data(full_message={
        "types": {"EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                                   {"name": "chainId", "type": "uint256"},
                                   {"name": "verifyingContract", "type": "address"}],
                  primary: _TYPES[primary]},
        "primaryType": primary, "domain": domain.to_json(), "message": what.message()})


def typed_hash(domain: LeaseDomain, what: LeaseKey | LeaseAccess) -> bytes:
    """The EIP-712 digest (what is signed; `offerAccess` and `confirmDelivery` put the LeaseAccess one on-chain)."""
    signable = _typed(domain, what)
    return keccak(b"\x19" + signable.version + signable.header + signable.body)


def sign(domain: LeaseDomain, what: LeaseKey | LeaseAccess, private_key: Any) -> bytes:
    return bytes(Account.sign_message(_typed(domain, what), private_key).signature)


def recover(domain: LeaseDomain, what: LeaseKey | LeaseAccess, signature: bytes) -> str:
    """The checksummed address that signed `what`, or LeaseMessageError for a malformed signature."""
    if len(signature) != 65:
        raise LeaseMessageError(f"signature: {len(signature)} bytes, expected 65")
    try:
        return to_checksum_address(Account.recover_message(_typed(domain, what), signature=signature))
    except Exception as exc:  # eth_keys raises several types for a bad v/r/s
        raise LeaseMessageError(f"signature: cannot recover a signer ({exc})") from exc


def verify(domain: LeaseDomain, what: LeaseKey | LeaseAccess, signature: bytes, expected_signer: str) -> None:
    """Raises LeaseMessageError unless `expected_signer` signed `what` in `domain`."""
    signer = recover(domain, what, signature)
    if signer != to_checksum_address(expected_signer):
        raise LeaseMessageError(f"lease {what.lease_id}: {type(what).__name__} signed by {signer}, "
                                f"not by {to_checksum_address(expected_signer)}")


__all__ = ["DOMAIN_NAME", "DOMAIN_VERSION", "NO_IMAGE", "LeaseAccess", "LeaseDomain", "LeaseKey", "LeaseMessageError",
           "normalize_ssh_key", "recover", "sign", "typed_hash", "verify"]
