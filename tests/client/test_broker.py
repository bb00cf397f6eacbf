"""The broker trusts nobody: per-party Redis ACL users on per-queue key prefixes, signed tasks and
replies, TLS. Against a private redis-server (never the shared one) and a real anvil deployment."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from celery.contrib.testing.worker import start_worker
from eth_account.signers.local import LocalAccount
from kombu.exceptions import OperationalError

from client.broker import QueueApps, grant, party_celery, revoke
from client.task_auth import ChainRoles, TaskAuth, TaskRefused, domain_of
from client.ports import free_port
from protocol.broker import provider_keyprefix
from protocol.deployments import Deployment
from protocol.task_auth import HEADER
from protocol.tasks import TASK_POG_ROUND, TASK_RUN_JOB, provider_queue
from tests.support.accounts import dev_account
from tests.support.redis import RedisTls, private_redis
from tests.support.waiting import wait_until
from unchained_cli.chain import LocalChain
from unchained_cli.deploy import Deployer, deploy_all

DEPLOYER, PROVIDER_A, PROVIDER_B, VERIFIER, PROVIDER_C, PROVIDER_D = (dev_account(i) for i in (0, 1, 2, 4, 5, 6))


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[Deployment, str]]:
    with LocalChain(port=free_port()) as chain:
        yield deploy_all(Deployer.connect(chain.rpc_url)), chain.rpc_url


@pytest.fixture(scope="module")
def admin_url() -> Iterator[str]:
    """A private redis-server; its default user is the operator's admin (parties get their own)."""
    try:
        with private_redis() as port:
            yield f"redis://127.0.0.1:{port}/0"
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@dataclass
class Worker:
    """A provider's worker: a signing app on its own prefix, with a task that records its runs."""

    app: Celery
    ran: list[tuple[str, list[Any]]]


def provider_worker(broker_url: str, account: LocalAccount, deployment: Deployment, rpc_url: str) -> Worker:
    from web3 import Web3

    auth = TaskAuth(domain_of(deployment), account, ChainRoles(Web3(Web3.HTTPProvider(rpc_url)), deployment,
                                                               account.address))
    app = party_celery(f"provider-{account.address[:8]}", broker_url, provider_keyprefix(account.address),
                       lambda: auth, task_acks_late=True, worker_prefetch_multiplier=1,
                       worker_hijack_root_logger=False, result_backend_transport_options=QUICK_GIVE_UP)
    ran: list[tuple[str, list[Any]]] = []

    def record(self: Any, *args: Any) -> str:
        ran.append((self.name, list(args)))
        if args == (RETRY_ONCE,) and self.request.retries == 0:
            raise self.retry(countdown=0)
        return f"ran {args}"

    for name in (TASK_RUN_JOB, TASK_POG_ROUND):
        app.task(name=name, bind=True, shared=False)(record)  # shared: every later app would get it

    def flaky(self: Any, *args: Any) -> str:  # fails once, then succeeds on its retry
        ran.append((self.name, list(args)))
        if self.request.retries == 0:
            raise self.retry(countdown=0)
        return "second time"

    app.task(name=TASK_FLAKY, bind=True, shared=False)(flaky)
    return Worker(app, ran)


TASK_FLAKY = "unchained.provider.test_flaky"  # not in TASK_SENDERS: the provider itself only
RETRY_ONCE = "retry me"  # a run_job or pog_round with this argument asks for its retry once


def sender(broker_url: str, account: LocalAccount, deployment: Deployment) -> QueueApps:
    auth = TaskAuth(domain_of(deployment), account)
    return QueueApps("sender", broker_url, lambda: auth, results=True, result_backend_transport_options=QUICK_GIVE_UP)


# A reply's subscription left behind by a finished test retries 20 times, 1 s apart, when it is
# collected after its connection closed, blocking whatever test runs then.
QUICK_GIVE_UP = {"retry_policy": {"max_retries": 1, "interval_start": 0}}


def test_a_task_and_its_reply_live_under_the_providers_prefix_only(deployment, admin_url) -> None:  # type: ignore[no-untyped-def]
    known, rpc = deployment
    admin = redis.Redis.from_url(admin_url)
    a_url = grant(admin_url, "provider", PROVIDER_A.address)
    # the operator's dispatch key is the deployer's; it sends with a verifier-like user here, to read the reply
    dispatcher_url = grant(admin_url, "verifier", DEPLOYER.address)
    worker = provider_worker(a_url, PROVIDER_A, known, rpc)
    apps = sender(dispatcher_url, DEPLOYER, known)
    with start_worker(worker.app, perform_ping_check=False, queues=[provider_queue(PROVIDER_A.address)]):
        result = apps.for_provider(PROVIDER_A.address).send_task(TASK_RUN_JOB, args=[7],
                                                                 queue=provider_queue(PROVIDER_A.address))
        reply = result.get(timeout=20)
    assert worker.ran == [(TASK_RUN_JOB, [7])]
    assert apps.for_provider(PROVIDER_A.address).unchained_auth().open_reply(result.id, reply,
                                                                             [PROVIDER_A.address]) == "ran (7,)"
    with pytest.raises(TaskRefused, match="not by whom"):  # a reply is checked against whom it was asked of
        apps.for_provider(PROVIDER_A.address).unchained_auth().open_reply(result.id, reply, [PROVIDER_B.address])
    keys = [k.decode() for k in admin.scan_iter(count=1000)]
    prefix = provider_keyprefix(PROVIDER_A.address)
    assert keys and all(k.startswith(prefix) for k in keys), keys
    assert f"{prefix}celery-task-meta-{result.id}" in keys  # the reply, under the provider's prefix too


def test_a_retry_is_signed_anew_by_the_worker(deployment, admin_url) -> None:  # type: ignore[no-untyped-def]
    """A retry republishes the task with its request's headers: the old signature, whose nonce
    was used, must not travel with it."""
    known, rpc = deployment
    a_url = grant(admin_url, "provider", PROVIDER_A.address)
    worker = provider_worker(a_url, PROVIDER_A, known, rpc)
    own = sender(a_url, PROVIDER_A, known)  # an internal task: the provider sends it to itself
    queue = provider_queue(PROVIDER_A.address)
    with start_worker(worker.app, perform_ping_check=False, queues=[queue]):
        result = own.for_provider(PROVIDER_A.address).send_task(TASK_FLAKY, args=[1], queue=queue)
        reply = result.get(timeout=20)
    assert worker.ran == [(TASK_FLAKY, [1]), (TASK_FLAKY, [1])]
    assert reply["result"] == "second time" and reply["signer"] == PROVIDER_A.address


def test_provider_a_cannot_read_pop_ack_or_publish_to_provider_bs_queue(deployment, admin_url) -> None:  # type: ignore[no-untyped-def]
    known, _ = deployment
    admin = redis.Redis.from_url(admin_url)
    a_url = grant(admin_url, "provider", PROVIDER_A.address)
    backend_url = grant(admin_url, "backend")
    b_prefix = provider_keyprefix(PROVIDER_B.address)
    b_queue = b_prefix + provider_queue(PROVIDER_B.address)
    # The backend may push onto B's queue (and nothing else); the message waits there for B.
    sender(backend_url, DEPLOYER, known).for_provider(PROVIDER_B.address).send_task(
        TASK_RUN_JOB, args=[1], queue=provider_queue(PROVIDER_B.address))
    assert admin.llen(b_queue) == 1
    admin.hset(b_prefix + "unacked", "tag-1", "[]")  # a message B holds unacknowledged
    admin.zadd(b_prefix + "unacked_index", {"tag-1": 1})
    a = redis.Redis.from_url(a_url)
    attempts = {
        "read": lambda: a.lrange(b_queue, 0, -1), "length": lambda: a.llen(b_queue),
        "pop": lambda: a.rpop(b_queue), "blocking pop": lambda: a.brpop([b_queue], timeout=1),
        "read unacked": lambda: a.hgetall(b_prefix + "unacked"),
        "acknowledge": lambda: a.hdel(b_prefix + "unacked", "tag-1"),
        "unindex": lambda: a.zrem(b_prefix + "unacked_index", "tag-1"),
        "publish": lambda: a.lpush(b_queue, "forged"),
        "bind": lambda: a.sadd(b_prefix + "_kombu.binding." + provider_queue(PROVIDER_B.address), "x"),
        "subscribe to replies": lambda: _subscribe(a, b_prefix + "celery-task-meta-x"),
        "read replies": lambda: a.get(b_prefix + "celery-task-meta-x"),
        "list keys": lambda: a.keys("*"), "scan keys": lambda: a.scan(0),
        "flush": lambda: a.flushdb(),
    }
    for what, attempt in attempts.items():
        with pytest.raises(redis.exceptions.NoPermissionError):
            attempt()
            pytest.fail(f"provider A could {what} on B's keys")
    # Through Celery as a provider would: publishing to B's queue fails too.
    forged = sender(a_url, PROVIDER_A, known).for_provider(PROVIDER_B.address)
    forged.conf.broker_transport_options = {**forged.conf.broker_transport_options, "max_retries": 0}
    with pytest.raises((OperationalError, redis.exceptions.NoPermissionError)):
        forged.send_task(TASK_RUN_JOB, args=[2], queue=provider_queue(PROVIDER_B.address), retry=False)
    assert admin.llen(b_queue) == 1 and admin.hlen(b_prefix + "unacked") == 1
    # The backend user pushes, and reads nothing.
    with pytest.raises(redis.exceptions.NoPermissionError):
        redis.Redis.from_url(backend_url).lrange(b_queue, 0, -1)
    # A revoked user cannot log in (a provider of its own: A's connections serve other tests' apps).
    c_url = grant(admin_url, "provider", PROVIDER_C.address)
    redis.Redis.from_url(c_url).ping()
    assert revoke(admin_url, "provider", PROVIDER_C.address)
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(c_url).ping()
    admin.delete(b_queue, b_prefix + "unacked", b_prefix + "unacked_index")


def _subscribe(client: redis.Redis, channel: str) -> object:
    pubsub = client.pubsub()
    pubsub.subscribe(channel)
    return pubsub.get_message(timeout=2)  # the refusal arrives as the reply to SUBSCRIBE


def test_forged_and_replayed_tasks_are_dropped(deployment, admin_url, caplog) -> None:  # type: ignore[no-untyped-def]
    """Whoever can write to B's queue (here: the admin, as if an ACL were wrong) still cannot make
    B run a task its sender may not send, one that claims another sender or has other arguments
    than were signed, one signed for another provider's queue, or one that ran before."""
    known, rpc = deployment
    admin = redis.Redis.from_url(admin_url)
    queue = provider_queue(PROVIDER_B.address)
    key = provider_keyprefix(PROVIDER_B.address) + queue
    # Sent while B's worker is down, so that the messages can be copied and altered first.
    to_b = sender(admin_url, PROVIDER_A, known).for_provider(PROVIDER_B.address)
    # A, a provider, forges a PoG round for B as if it were a verifier: round 1 is not A's to run.
    to_b.send_task(TASK_POG_ROUND, args=[1, "0x" + "00" * 32], queue=queue)
    to_b.send_task(TASK_RUN_JOB, args=[3], queue=queue)  # signed by A, will claim the dispatcher
    sender(admin_url, DEPLOYER, known).for_provider(PROVIDER_B.address).send_task(TASK_RUN_JOB, args=[4], queue=queue)
    forged_round, claims, genuine = (json.loads(m) for m in reversed(admin.lrange(key, 0, -1)))
    admin.delete(key)
    claims["headers"][HEADER]["sender"] = DEPLOYER.address
    altered = json.loads(json.dumps(genuine))
    altered["body"] = base64.b64encode(json.dumps([[5], {}, {}]).encode()).decode()
    # The dispatcher's task for A's queue, copied into B's (with the routing key it was signed for).
    a_key = provider_keyprefix(PROVIDER_A.address) + provider_queue(PROVIDER_A.address)
    sender(admin_url, DEPLOYER, known).for_provider(PROVIDER_A.address).send_task(
        TASK_RUN_JOB, args=[6], queue=provider_queue(PROVIDER_A.address))
    for_a = json.loads(admin.rpop(a_key))
    for message in (forged_round, claims, genuine, genuine, altered, for_a):  # LPUSH + BRPOP: in this order
        admin.lpush(key, json.dumps(message))
    worker = provider_worker(grant(admin_url, "provider", PROVIDER_B.address), PROVIDER_B, known, rpc)
    caplog.set_level(logging.WARNING, logger="client.task_auth")
    with start_worker(worker.app, perform_ping_check=False, queues=[queue]):
        wait_until(lambda: caplog.text.count("dropped") >= 5 and admin.llen(key) == 0, 15,
                   "five forged tasks dropped and the queue empty")
    assert worker.ran == [(TASK_RUN_JOB, [4])], caplog.text
    assert "may not send unchained.provider.pog_round" in caplog.text
    # the false sender, the altered arguments, the other queue
    assert caplog.text.count(f"claims {DEPLOYER.address}") == 3
    assert "replayed" in caplog.text


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it (openssl, made here)."""
    ca_key, ca, key, csr, cert = (directory / n for n in ("ca.key", "ca.crt", "server.key", "server.csr", "server.crt"))
    ext = directory / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    for argv in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "1",
         "-subj", "/CN=unchained test CA"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "1",
         "-extfile", ext],
    ):
        subprocess.run(["openssl", *map(str, argv)], check=True, capture_output=True)
    return ca, cert, key


def test_rediss_url_talks_tls_and_checks_the_servers_certificate(deployment, tmp_path) -> None:  # type: ignore[no-untyped-def]
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    known, rpc = deployment
    ca, cert, key = _certificates(tmp_path)
    with private_redis(RedisTls(ca, cert, key)) as tls_port:
        admin_url = f"rediss://127.0.0.1:{tls_port}/0?ssl_ca_certs={ca}"
        a_url = grant(admin_url, "provider", PROVIDER_A.address)
        assert a_url.startswith("rediss://provider-") and a_url.endswith(f"?ssl_ca_certs={ca}")
        worker = provider_worker(a_url, PROVIDER_A, known, rpc)
        apps = sender(grant(admin_url, "verifier", DEPLOYER.address), DEPLOYER, known)
        queue = provider_queue(PROVIDER_A.address)
        with start_worker(worker.app, perform_ping_check=False, queues=[queue]):
            result = apps.for_provider(PROVIDER_A.address).send_task(TASK_RUN_JOB, args=[9], queue=queue)
            assert apps.for_provider(PROVIDER_A.address).unchained_auth().open_reply(
                result.id, result.get(timeout=20), [PROVIDER_A.address]) == "ran (9,)"
            del result  # collected by private_redis's exit, while the server is still up
        # Without the CA the server's certificate does not verify; plain text is not spoken at all.
        with pytest.raises(redis.exceptions.ConnectionError, match="certificate verify failed"):
            redis.Redis.from_url(a_url.split("?")[0]).ping()
        with pytest.raises(redis.exceptions.ConnectionError):
            redis.Redis.from_url(a_url.split("?")[0].replace("rediss://", "redis://"), socket_timeout=2).ping()


def test_a_task_whose_sender_cannot_be_checked_stays_queued(deployment, admin_url, caplog) -> None:  # type: ignore[no-untyped-def]
    """The node is down: who requested round 1 cannot be read, so the task goes back on the queue."""
    known, _ = deployment
    admin = redis.Redis.from_url(admin_url)
    queue = provider_queue(PROVIDER_D.address)
    key = provider_keyprefix(PROVIDER_D.address) + queue
    worker = provider_worker(grant(admin_url, "provider", PROVIDER_D.address), PROVIDER_D, known,
                             f"http://127.0.0.1:{free_port()}")  # no node there
    sender(admin_url, VERIFIER, known).for_provider(PROVIDER_D.address).send_task(
        TASK_POG_ROUND, args=[1, "0x" + "00" * 32], queue=queue)
    caplog.set_level(logging.WARNING, logger="client.task_auth")
    with start_worker(worker.app, perform_ping_check=False, queues=[queue]):
        wait_until(lambda: caplog.text.count("requeued") >= 2, 15, "the task requeued twice")
    assert worker.ran == [] and "dropped" not in caplog.text
    wait_until(lambda: admin.llen(key) == 1, 5, "the task back on its queue")  # still there for a worker that can check it
    admin.delete(key)


# -- nothing off-chain can be borrowed -------------------------------------------------------------

PROVIDER_E = dev_account(7)


def _round_for(known: Deployment, rpc: str, provider: LocalAccount) -> tuple[int, str]:
    """A PoG round that VERIFIER requested, on chain, for `provider` (staked and registered here)."""
    from eth_utils import keccak

    from devtools.session import ChainSession

    s = ChainSession.connect(rpc, known)
    registry, pog = s.contract("ProviderRegistry"), s.contract("ProofOfGpu")
    if not registry.functions.isActive(provider.address).call():
        s.send(s.contract("Staking").functions.stake(), provider.address, value=2 * 10**18)
        s.send(registry.functions.register(b"CPU".ljust(32, b"\0"), [keccak(b"gpu-e0")], 10**16, 10**12, ""),
               provider.address)
        s.send(s.contract("Staking").functions.stake(), VERIFIER.address, value=2 * 10**18)
    secret = keccak(b"round-%d" % pog.functions.roundCount().call())
    s.send(pog.functions.requestRound(provider.address, 64, keccak(secret)), VERIFIER.address)
    round_id = pog.functions.roundCount().call()
    assert pog.functions.round(round_id).call().verifier == VERIFIER.address
    return round_id, "0x" + secret.hex()


@pytest.mark.parametrize("attach", ["link", "chain"])
def test_a_verifier_cannot_attach_a_job_to_a_round_it_requested(deployment, admin_url, caplog, attach) -> None:  # type: ignore[no-untyped-def]
    """The verifier may send pog_round for the round it requested; a run_job attached to it as
    a callback (or a chain) would be published by the provider's worker, signed with the
    provider's own key. The whole task is dropped instead."""
    known, rpc = deployment
    round_id, secret = _round_for(known, rpc, PROVIDER_E)
    queue = provider_queue(PROVIDER_E.address)
    worker = provider_worker(grant(admin_url, "provider", PROVIDER_E.address), PROVIDER_E, known, rpc)
    to_e = sender(grant(admin_url, "verifier", VERIFIER.address), VERIFIER, known).for_provider(PROVIDER_E.address)
    borrowed = to_e.signature(TASK_RUN_JOB, args=(6020,), immutable=True, queue=queue)
    options = {"link": borrowed} if attach == "link" else {"chain": [borrowed]}
    caplog.set_level(logging.WARNING, logger="client.task_auth")
    with start_worker(worker.app, perform_ping_check=False, queues=[queue]):
        to_e.send_task(TASK_POG_ROUND, args=[round_id, secret], queue=queue, **options)
        wait_until(lambda: "dropped" in caplog.text or len(worker.ran) >= 2, 20,
                   "the round dropped, or the round and its attached job run")
    assert (TASK_RUN_JOB, [6020]) not in worker.ran, "the verifier made the provider run a job of its choosing"
    assert worker.ran == [] and f"names further work ({'callbacks' if attach == 'link' else 'chain'})" in caplog.text


@pytest.mark.parametrize("field", ["callbacks", "errbacks", "chain", "chord"])
def test_a_callback_added_to_a_queued_message_in_the_sqlite_broker_is_refused(deployment, tmp_path, caplog,  # type: ignore[no-untyped-def]
                                                                              field) -> None:
    """On the SQLite broker anyone who can open the file edits queued messages: a callback (an
    errback, a chain, a chord) added to the dispatcher's genuine run_job is not covered by its
    signature, so the task is dropped (and the work, which the worker would sign, never sent)."""
    import sqlite3

    known, rpc = deployment
    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}"
    queue = provider_queue(PROVIDER_A.address)
    apps = sender(url, DEPLOYER, known).for_provider(PROVIDER_A.address)
    apps.send_task(TASK_RUN_JOB, args=[11], queue=queue)
    callback = dict(apps.signature(TASK_FLAKY, args=(6021,), immutable=True, queue=queue))
    with sqlite3.connect(tmp_path / "broker.sqlite") as db:
        [(row, payload)] = db.execute("SELECT id, payload FROM kombu_message").fetchall()
        message = json.loads(payload)
        args, kwargs, embed = json.loads(base64.b64decode(message["body"]))
        assert args == [11]
        added = callback if field == "chord" else [callback]
        message["body"] = base64.b64encode(json.dumps([args, kwargs, {**embed, field: added}]).encode()).decode()
        db.execute("UPDATE kombu_message SET payload = ? WHERE id = ?", (json.dumps(message), row))
    worker = provider_worker(url, PROVIDER_A, known, rpc)
    caplog.set_level(logging.WARNING, logger="client.task_auth")
    with start_worker(worker.app, perform_ping_check=False, queues=[queue]):
        wait_until(lambda: "dropped" in caplog.text or len(worker.ran) >= 2, 20,
                   "the edited task dropped, or it and its callback run")
    assert (TASK_FLAKY, [6021]) not in worker.ran, "a callback nobody signed ran under the provider's key"
    assert worker.ran == [] and f"names further work ({field})" in caplog.text


def test_a_providers_own_key_starts_no_job_but_retries_a_dispatched_one(deployment, admin_url, caplog) -> None:  # type: ignore[no-untyped-def]
    known, rpc = deployment
    a_url = grant(admin_url, "provider", PROVIDER_A.address)
    queue = provider_queue(PROVIDER_A.address)
    worker = provider_worker(a_url, PROVIDER_A, known, rpc)
    caplog.set_level(logging.WARNING, logger="client.task_auth")
    with start_worker(worker.app, perform_ping_check=False, queues=[queue]):
        sender(a_url, PROVIDER_A, known).for_provider(PROVIDER_A.address).send_task(TASK_RUN_JOB, args=[8],
                                                                                    queue=queue)
        dispatched = sender(grant(admin_url, "verifier", DEPLOYER.address), DEPLOYER, known).for_provider(
            PROVIDER_A.address).send_task(TASK_RUN_JOB, args=[RETRY_ONCE], queue=queue)
        reply = dispatched.get(timeout=20)  # its retry, re-sent by the worker with its own key, ran
    assert worker.ran == [(TASK_RUN_JOB, [RETRY_ONCE]), (TASK_RUN_JOB, [RETRY_ONCE])], caplog.text
    assert reply["signer"] == PROVIDER_A.address
    assert f"{PROVIDER_A.address} may not send {TASK_RUN_JOB}" in caplog.text


def _resp3(url: str) -> Any:
    """A raw RESP3 connection logged in as the URL's user (invalidation messages of CLIENT
    TRACKING arrive on it as pushes, no channel needed)."""
    import socket
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    conn = socket.create_connection((parts.hostname, parts.port), timeout=5)
    user, password = unquote(parts.username or "default"), unquote(parts.password or "")
    _command(conn, "HELLO", "3", "AUTH", user, password)
    assert b"proto" in _read_until(conn, b"proto"), "HELLO 3 refused"
    return conn


def _command(conn: Any, *words: str) -> None:
    conn.sendall(f"*{len(words)}\r\n".encode() + b"".join(f"${len(w)}\r\n{w}\r\n".encode() for w in words))


def _read_until(conn: Any, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_client_tracking_shows_no_party_anothers_key_names(deployment, admin_url) -> None:  # type: ignore[no-untyped-def]
    """`CLIENT TRACKING on BCAST PREFIX provider.` would push a provider every key name another
    provider's queue touches, and a verifier the id of every reply (which its user may GET)."""
    admin = redis.Redis.from_url(admin_url)
    b_prefix = provider_keyprefix(PROVIDER_B.address)
    for party, url in (("provider A", grant(admin_url, "provider", PROVIDER_A.address)),
                       ("the verifier", grant(admin_url, "verifier", VERIFIER.address))):
        conn = _resp3(url)
        try:
            _command(conn, "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "provider.")
            answer = _read_until(conn, b"\r\n")
            secret_id = f"celery-task-meta-{base64.b16encode(bytes(range(8))).decode()}-{party[0]}"
            admin.lpush(b_prefix + provider_queue(PROVIDER_B.address), "a message")
            admin.set(b_prefix + secret_id, "a reply")
            _command(conn, "PING")  # B's writes came first: any invalidation is pushed before PONG
            seen = answer + _read_until(conn, b"PONG")
        finally:
            conn.close()
        assert secret_id.encode() not in seen and provider_queue(PROVIDER_B.address).encode() not in seen, \
            f"{party} read B's key names: {seen[:300]!r}"
        assert answer.startswith(b"-NOPERM"), answer
    admin.delete(b_prefix + provider_queue(PROVIDER_B.address))


@pytest.mark.parametrize("command", [
    ["CLIENT", "TRACKING", "on"], ["CLIENT", "ID"], ["CLIENT", "GETNAME"], ["FUNCTION", "LIST"],
    ["FUNCTION", "FLUSH"], ["SCRIPT", "FLUSH"], ["SCRIPT", "EXISTS", "0"], ["EVAL", "return 1", "0"],
    ["DBSIZE"], ["MEMORY", "STATS"], ["TIME"], ["WAIT", "0", "0"], ["LOLWUT"],
], ids=lambda words: "-".join(words[:2]).lower())
def test_providers_and_verifiers_run_only_what_a_worker_and_a_verifier_need(admin_url, command) -> None:  # type: ignore[no-untyped-def]
    """Their users are allowlists, like the backend's: commands that reach past their keys (the
    server's scripts and functions, its size and memory, other clients) are refused."""
    for url in (grant(admin_url, "provider", PROVIDER_C.address), grant(admin_url, "verifier", VERIFIER.address)):
        client = redis.Redis.from_url(url)
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.execute_command(*command)
            pytest.fail(f"{url.split(':')[1][2:]} may run {' '.join(command)}")
        client.close()


def test_granting_a_user_again_closes_the_sessions_opened_with_its_old_password(admin_url) -> None:  # type: ignore[no-untyped-def]
    old = redis.Redis.from_url(grant(admin_url, "provider", PROVIDER_C.address), retry_on_error=[],
                               single_connection_client=True)
    assert old.ping()
    new = redis.Redis.from_url(grant(admin_url, "provider", PROVIDER_C.address))
    assert new.ping()
    with pytest.raises((redis.exceptions.ConnectionError, redis.exceptions.AuthenticationError)):
        old.ping()  # the session opened with the old password is gone (a reconnection is refused)
        pytest.fail("a session opened with the old password is still usable")
    assert new.ping()
    old.close()
    new.close()
