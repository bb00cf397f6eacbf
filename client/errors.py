"""The client layer's one root exception and its narrow subclasses."""

from __future__ import annotations

from pathlib import Path
from typing import Any


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


class DeploymentUnreadable(ClientError):
    """The deployment file is missing, malformed, or written for another chain than the node's."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot read deployment {path}: {reason}")
        self.path = path
        self.reason = reason


class NodeUnavailable(ClientError):
    """The JSON-RPC node does not answer, or does not mine: transient, try again later."""


class TransactionNotMined(NodeUnavailable):
    """A transaction was sent but no receipt came within the bound; it may still be mined."""

    def __init__(self, what: str, tx_hash: str, timeout_s: float) -> None:
        super().__init__(f"{what}: tx {tx_hash} was sent but not mined within {timeout_s:.0f}s (is the chain "
                         "producing blocks?); check it before sending again")
        self.what = what
        self.tx_hash = tx_hash
        self.timeout_s = timeout_s


class TransactionReverted(ClientError):
    """A contract refused a transaction (at its gas estimate, or mined with status 0).

    `error` is the custom error's name and `error_args` its decoded arguments by name, found in the
    ABIs of every contract; `error` is None when the revert data matches none of them (then
    `reason` is what the node said)."""

    def __init__(self, what: str, error: str | None, args: dict[str, Any], reason: str,
                 tx_hash: str | None = None) -> None:
        # Refused at the estimate, nothing was sent ("would revert"); or mined and reverted.
        super().__init__(f"{what} reverted: {reason} (tx {tx_hash})" if tx_hash else f"{what} would revert: {reason}")
        self.what = what
        self.error = error
        self.error_args = args  # not `args`: BaseException owns that name
        self.reason = reason
        self.tx_hash = tx_hash


class TransactionRefused(ClientError):
    """The node refused to take a transaction (insufficient funds, a fee below its minimum...)."""


class SignInFailed(ClientError):
    """Sign-In with Ethereum to the backend failed; `status` is the HTTP status (None: refused
    here, e.g. a server asking to sign for another domain); `transient`: worth trying later."""

    def __init__(self, message: str, status: int | None, transient: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient
class TaskRefused(ClientError):
    """A broker task or reply whose signature, expiry, nonce or sender does not hold."""


class TaskExpired(TaskRefused):
    """A task signed for a time that has passed (it waited in the queue while the consumer was
    down): refused as the rules say, and nobody's fault."""


class BrokerAdminError(ClientError):
    """The broker refused, or could not be reached for, a change of its users."""


class InstanceRunning(ClientError):
    """Another process holds the lock of a data directory (client.instance_lock)."""

    def __init__(self, directory: Path, role: str, holder: str, option: str = "--data-dir") -> None:
        who = f" (pid {holder})" if holder else ""
        super().__init__(f"another {role} is running on {directory}{who}: stop it first, or pass another {option}")
        self.directory = directory
        self.role = role
        self.holder = holder


class QueueClaimed(ClientError):
    """Another running agent consumes this queue (client.queue_claim)."""

    def __init__(self, queue: str, host: str, directory: str, pid: str, ttl_s: float) -> None:
        super().__init__(f"another agent consumes {queue} (host {host}, data dir {directory}, pid {pid}): two "
                         f"agents with one key would take the same jobs; stop it first (a claim of an agent "
                         f"that died lapses within {ttl_s:g} s)")
        self.queue, self.host, self.directory, self.pid = queue, host, directory, pid
