"""The Redis key layout of the broker and the ACL rules that confine each party to its keys.

Kombu's Redis transport keeps a queue's messages, its exchange bindings (`_kombu.binding.*`),
its unacknowledged messages (`unacked`, `unacked_index`, `unacked_mutex`) and its fan-out
channels under shared names, and Celery's Redis result store writes `celery-task-meta-<id>` keys
and publishes on channels of the same name. Every party here talks to a provider's queue through
a connection whose `global_keyprefix` is that provider's (`provider.<address>:`), for the
transport and the result store alike, so that everything belonging to one provider's queue,
bookkeeping and replies included, lies under one prefix and an ACL can give it to that provider
alone. A verifier's own keys lie under `verifier.<address>:`.

Rights (`acl_rules`):
- a provider: everything under its own prefix (keys and channels), nothing else;
- a verifier: everything under its own prefix; on providers' prefixes only to push a message
  onto a queue, declare its binding, and read and await the replies to what it sent;
- the backend (operator): the same push rights on every provider's queue, nothing to read.
A party cannot list key names (`SCAN`, `KEYS`) or run administrative commands.
Pure: no I/O; `client.broker` applies the rules.
"""

from __future__ import annotations

import re

from protocol.tasks import BadAddress

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
BACKEND_USER = "unchained-backend"
# Commands no party needs and that would reach beyond its keys (key names of others, the
# server's configuration). SELECT stays: the key patterns hold in every database.
_DENIED = "-@dangerous -@admin -scan -randomkey -swapdb -move -copy -pubsub"
# What a publisher needs on another party's queue (kombu: LPUSH the message, SADD/SMEMBERS the
# queue's binding on declare and routing, LLEN its length on declare, in MULTI/EXEC pipelines; redis-py may ask PING).
_PUBLISH = "+lpush +llen +sadd +smembers +exists +ping +select +multi +exec +discard"
# What a client needs to await a reply: read the stored result, or subscribe to its channel.
_AWAIT = "+get +mget +subscribe +unsubscribe +ping +select"


def _checked(address: str) -> str:
    if not _ADDRESS.match(address):
        raise BadAddress(f"not an address: {address!r}")
    return address.lower()


def provider_keyprefix(address: str) -> str:
    """Prefix of every key and channel of a provider's queue and of its replies."""
    return f"provider.{_checked(address)}:"


def verifier_keyprefix(address: str) -> str:
    return f"verifier.{_checked(address)}:"


def provider_user(address: str) -> str:
    return f"provider-{_checked(address)}"


def verifier_user(address: str) -> str:
    return f"verifier-{_checked(address)}"


def provider_acl_rules(address: str) -> list[str]:
    """`ACL SETUSER <provider_user> <rules...> >password` for a provider."""
    prefix = provider_keyprefix(address)
    return ["reset", "on", "+@all", *_DENIED.split(), f"~{prefix}*", f"&{prefix}*"]


def verifier_acl_rules(address: str) -> list[str]:
    prefix = verifier_keyprefix(address)
    return ["reset", "on", "+@all", *_DENIED.split(), f"~{prefix}*", f"&{prefix}*",
            f"({_PUBLISH} ~provider.*:provider.* ~provider.*:_kombu.binding.*)",
            f"({_AWAIT} %R~provider.*:celery-task-meta-* &provider.*:celery-task-meta-*)"]


def backend_acl_rules() -> list[str]:
    return ["reset", "on", "-@all", *_PUBLISH.split(), "~provider.*:provider.*", "~provider.*:_kombu.binding.*"]
