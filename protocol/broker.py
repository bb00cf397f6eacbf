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
- a provider: what a worker does (`_WORKER`) under its own prefix (keys and channels), nothing else;
- a verifier: the same under its own prefix; on providers' prefixes only to push a message
  onto a queue, declare its binding, and read and await the replies to what it sent;
- the backend (operator): the same push rights on every provider's queue, nothing to read.
Each user is an allowlist of commands (`_WORKER`, `_PUBLISH`, `_AWAIT`): a party cannot list key
names (`SCAN`, `KEYS`, `CLIENT TRACKING`), read the server's state or run administrative commands.
Pure: no I/O; `client.broker` applies the rules.
"""

from __future__ import annotations

import re

from protocol.tasks import BadAddress

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
BACKEND_USER = "unchained-backend"
# Every party's user is an allowlist of the commands its Celery client sends (recorded from the
# real worker, verifier and backend against Redis: MONITOR, then ACL LOG under these rules), so
# nothing that reaches past its keys is left: no CLIENT (TRACKING would push it every key name
# under a prefix), FUNCTION, SCRIPT FLUSH, EVAL, DBSIZE, MEMORY, KEYS, SCAN, INFO or MONITOR.
# A worker on its own queue (kombu's Redis transport with acks_late, Celery's Redis result store):
# BRPOP the messages; LPUSH, LLEN, SADD (SMEMBERS, EXISTS: kombu's routing and declare paths) to
# publish its own follow-ups; the unacknowledged bookkeeping (HSET/HGET/HDEL,
# ZADD/ZREM/ZREVRANGEBYSCORE) and its restore mutex (SET NX, WATCH, and redis-py's lock release:
# a GET/DEL script run by EVALSHA after SCRIPT LOAD; Redis checks a script's commands and keys
# against the same user); replies (SETEX, PUBLISH; GET, SUBSCRIBE/UNSUBSCRIBE to await one).
# PING, SELECT, MULTI/EXEC/DISCARD, UNWATCH are connection plumbing.
_WORKER = ("+brpop +lpush +llen +sadd +smembers +exists +hset +hget +hdel +zadd +zrem +zrevrangebyscore "
           "+set +setex +get +del +publish +subscribe +unsubscribe +watch +unwatch +evalsha +script|load "
           "+ping +select +multi +exec +discard")
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
    return ["reset", "on", "-@all", *_WORKER.split(), f"~{prefix}*", f"&{prefix}*"]


def verifier_acl_rules(address: str) -> list[str]:
    prefix = verifier_keyprefix(address)
    return ["reset", "on", "-@all", *_WORKER.split(), f"~{prefix}*", f"&{prefix}*",
            f"({_PUBLISH} ~provider.*:provider.* ~provider.*:_kombu.binding.*)",
            f"({_AWAIT} %R~provider.*:celery-task-meta-* &provider.*:celery-task-meta-*)"]


def backend_acl_rules() -> list[str]:
    return ["reset", "on", "-@all", *_PUBLISH.split(), "~provider.*:provider.*", "~provider.*:_kombu.binding.*"]
