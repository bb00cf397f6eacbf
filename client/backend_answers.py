"""How the backend answers, as the parties' clients of it (provider agent, verifier) read it."""

from __future__ import annotations

# Statuses worth retrying: 404 and 409 mean the backend's indexer has not seen the job or its
# commit yet (it follows the chain a few blocks behind), 429 and 5xx are load or outages.
RETRYABLE = frozenset({404, 408, 409, 425, 429, 500, 502, 503, 504})

# How the backend's framework answers a route it does not have (an earlier version of the
# backend), as opposed to a 404 of ours, whose detail names what is missing.
NO_SUCH_ROUTE = frozenset({(404, "Not Found"), (405, "Method Not Allowed")})


def no_such_route(status: int | None, detail: object) -> bool:
    return (status, detail) in NO_SUCH_ROUTE


__all__ = ["NO_SUCH_ROUTE", "RETRYABLE", "no_such_route"]
