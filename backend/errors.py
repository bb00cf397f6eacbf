"""Domain errors of the backend. The API maps each subclass to one HTTP status (api/errors.py)."""

from __future__ import annotations


class BackendError(Exception):
    """Root of every error the backend raises on purpose."""


class NotFound(BackendError):
    def __init__(self, what: str, key: object) -> None:
        super().__init__(f"{what} {key} not found")
        self.what, self.key = what, key


class BadInput(BackendError):
    """A request is well-formed HTTP but its content is invalid (message says which field)."""


class TooLarge(BackendError):
    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size} bytes or more; the limit is {limit}")
        self.what, self.size, self.limit = what, size, limit


class Unauthenticated(BackendError):
    """No session, or the session or signed message is invalid, expired or replayed."""


class Forbidden(BackendError):
    """The caller is signed in but is not the party allowed to do this."""


class Conflict(BackendError):
    """The request contradicts state: the chain, or something already stored."""


class ChainUnavailable(BackendError):
    """The JSON-RPC node or the deployment file cannot be reached or read."""


class DispatchError(BackendError):
    """A task could not be handed to the broker."""


class StorageUnavailable(BackendError):
    """The blob store the replicas share cannot be reached or refused (backend.object_store)."""
