"""The client layer: what the services and the CLI share that does I/O, written once.

It sits above `protocol/` (pure) and below `backend/`, `provider_agent/`, `verifier/` and
`unchained_cli/`, and imports none of them. Here: the keystore loader and its password story
(`client.keystore`), the sandboxed model executor that the provider's jobs and the verifiers'
re-executions share (`client.sandbox`, its child `client.sandbox_child`), and the payouts every
party can pull from the contracts (`client.payouts`).
"""

from client.errors import ClientError, KeystoreError, PasswordUnavailable, PayoutError, WrongPassword

__all__ = ["ClientError", "KeystoreError", "PasswordUnavailable", "PayoutError", "WrongPassword"]
