"""The client layer's one root exception and its narrow subclasses."""

from __future__ import annotations

from pathlib import Path


class ClientError(Exception):
    """Root of every error raised by `client`: the message is one line saying what to fix."""


class KeystoreError(ClientError):
    """A keystore file cannot be read, is not an eth-account keystore, or cannot be written."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"keystore {path}: {reason}")
        self.path = path
        self.reason = reason


class WrongPassword(KeystoreError):
    """The password does not decrypt the keystore (eth-account says "MAC mismatch")."""

    def __init__(self, path: Path) -> None:
        ClientError.__init__(self, f"wrong password for keystore {path}")
        self.path = path
        self.reason = "wrong password"


class PasswordUnavailable(ClientError):
    """No password file was given and there is no terminal to ask on, or the file is unusable."""


class PayoutError(ClientError):
    """A balance could not be read or paid out; the message names the contract."""
