"""The marketplace backend: an index of the chain plus off-chain artefacts, served over HTTP.

- `indexer`: follows every contract event into the database (confirmations, resume, idempotent,
  rebuildable from events alone); `projections` says what each event does.
- `api`: the FastAPI app (`api.app.create_app`), the dashboard at `/`.
- `auth`: Sign-In with Ethereum sessions; `hub`: the model hub and job inputs; `jobs`: specs,
  results and output uploads checked against on-chain roots; `matching`: provider ranking;
  `dispatch`: funded jobs to the provider's Celery queue, signed with the dispatch key (a key that
  signs broker messages only and holds no funds: UNCHAINED_BACKEND_KEYSTORE).
- `cli`: the Typer sub-app `backend_app` (serve, index, rebuild). The renter's side (its own
  keystore; the server never holds a renter's key) is the `renter` package.
"""

from backend.errors import (
    BackendError,
    BadInput,
    ChainUnavailable,
    Conflict,
    DispatchError,
    Forbidden,
    NotFound,
    TooLarge,
    Unauthenticated,
)
from backend.settings import Settings, get_settings

__all__ = [
    "BackendError",
    "BadInput",
    "ChainUnavailable",
    "Conflict",
    "DispatchError",
    "Forbidden",
    "NotFound",
    "Settings",
    "TooLarge",
    "Unauthenticated",
    "get_settings",
]
