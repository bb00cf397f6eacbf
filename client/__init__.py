"""The client layer: what the services and the CLI share that does I/O, written once.

It sits above `protocol/` (pure) and below `backend/`, `renter/`, `provider_agent/`, `verifier/`
and `unchained_cli/`, and imports none of them. Here: the one chain context every party's chain
object is, with the one deployment loader (`client.chain`), the one transaction sender of every party
(`client.tx`, reverts decoded by `client.reverts`), the one Sign-In with Ethereum client
(`client.siwe`), the typed contract views that every party reads the contracts through
(`client.contracts`), the one log follower with a cursor that every party reads contract events
through (`client.log_follower`), the keystore loader and its password story (`client.keystore`),
the sandboxed model executor that the provider's jobs and the verifiers' re-executions share
(`client.sandbox`, its child `client.sandbox_child`), the payouts every party can pull from the
contracts (`client.payouts`), and the broker: every party's Celery app on its key layout with its
Redis users (`client.broker`), every task and reply signed and checked (`client.task_auth`); and
what every party's commands and settings share without being a format the parties agree on:
amounts and times as people read them (`client.units`), settings from prefixed environment
variables (`client.settings`). Every error raised here is a `ClientError` (`client.errors`).
"""

from client.errors import (
    BrokerAdminError,
    ClientError,
    DeploymentUnreadable,
    KeystoreError,
    NodeUnavailable,
    PasswordUnavailable,
    PayoutError,
    SignInFailed,
    TaskRefused,
    TransactionNotMined,
    TransactionRefused,
    TransactionReverted,
    WrongPassword,
)

__all__ = ["BrokerAdminError", "ClientError", "DeploymentUnreadable", "KeystoreError", "NodeUnavailable", "PasswordUnavailable", "PayoutError",
           "SignInFailed", "TaskRefused", "TransactionNotMined", "TransactionRefused", "TransactionReverted",
           "WrongPassword"]
