"""Signatures of tasks and replies, without a broker: what is refused before any role is asked
of the chain (expiry, malformed headers, altered fields, foreign replies), and broker URLs."""

from __future__ import annotations

import ssl
from datetime import datetime, timezone

import pytest
from eth_account import Account
from web3 import Web3

from client.broker import split_tls, user_url
from client.task_auth import ChainRoles, TaskAuth, TaskRefused, UsedNonces
from protocol.broker import provider_acl_rules, provider_keyprefix
from protocol.deployments import DeployedContract, Deployment
from protocol.task_auth import MAX_TTL_S, TaskDomain, TaskSignature
from protocol.tasks import BadBrokerUrl, TASK_LEASE, TASK_RUN_JOB

SENDER, WORKER = Account.create(), Account.create()
DOMAIN = TaskDomain(31337, "0x" + "11" * 20)
QUEUE = f"provider.{WORKER.address.lower()}"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def consumer(clock: Clock, used: UsedNonces | None = None) -> TaskAuth:
    """A consumer whose roles are never reached by these tests (no node behind it)."""
    empty = DeployedContract("0x" + "22" * 20, [], 0)
    deployment = Deployment(31337, SENDER.address, {"ProofOfGpu": empty})
    return TaskAuth(DOMAIN, WORKER, ChainRoles(Web3(), deployment, WORKER.address), clock=clock,
                    used=used or UsedNonces())


def test_an_expired_task_is_refused() -> None:
    clock = Clock(1_000_000.0)
    header = TaskAuth(DOMAIN, SENDER, clock=clock, ttl_s=60).sign_task("id-1", TASK_RUN_JOB, QUEUE, [1], {})
    clock.now += 61
    with pytest.raises(TaskRefused, match="expired"):
        consumer(clock).check_task(TASK_RUN_JOB, QUEUE, [1], {}, header)


def test_a_countdown_task_expires_after_its_eta() -> None:
    clock = Clock(1_000_000.0)
    eta = datetime.fromtimestamp(clock.now + 3600, timezone.utc).isoformat()
    header = TaskAuth(DOMAIN, SENDER, clock=clock, ttl_s=60).sign_task("id-1", TASK_RUN_JOB, QUEUE, [1], {}, eta)
    assert header["expiry"] == int(clock.now) + 3600 + 60


def test_an_expiry_beyond_the_longest_lifetime_is_refused() -> None:
    clock = Clock(1_000_000.0)
    header = TaskAuth(DOMAIN, SENDER, clock=clock, ttl_s=MAX_TTL_S + 10).sign_task("i", TASK_RUN_JOB, QUEUE, [1], {})
    with pytest.raises(TaskRefused, match="too far ahead"):
        consumer(clock).check_task(TASK_RUN_JOB, QUEUE, [1], {}, header)


@pytest.mark.parametrize("change, words", [
    (lambda h: None, "no signature header"),
    (lambda h: {**h, "sender": "0x12"}, "sender is not an address"),
    (lambda h: {**h, "expiry": "soon"}, "expiry is not a uint64"),
    (lambda h: {**h, "nonce": "0x00"}, "nonce is not 32 bytes"),
    (lambda h: {**h, "signature": "0x" + "00" * 65}, "signature"),
])
def test_a_malformed_header_is_refused(change, words) -> None:  # type: ignore[no-untyped-def]
    clock = Clock(1_000_000.0)
    header = TaskAuth(DOMAIN, SENDER, clock=clock).sign_task("id-1", TASK_RUN_JOB, QUEUE, [1], {})
    with pytest.raises(TaskRefused, match=words):
        consumer(clock).check_task(TASK_RUN_JOB, QUEUE, [1], {}, change(header))


@pytest.mark.parametrize("task, queue, args", [
    (TASK_RUN_JOB, QUEUE, [2]),  # other arguments
    (TASK_RUN_JOB, "provider.0x" + "33" * 20, [1]),  # another provider's queue
    ("unchained.provider.lease", QUEUE, [1]),  # another task
], ids=["other-arguments", "other-queue", "other-task"])  # stable ids: QUEUE is random per process
def test_a_signature_binds_task_queue_and_arguments(task, queue, args) -> None:  # type: ignore[no-untyped-def]
    clock = Clock(1_000_000.0)
    header = TaskAuth(DOMAIN, SENDER, clock=clock).sign_task("id-1", TASK_RUN_JOB, QUEUE, [1], {})
    with pytest.raises(TaskRefused, match="claims"):
        consumer(clock).check_task(task, queue, args, {}, header)


def test_a_signature_for_another_deployment_is_refused() -> None:
    clock = Clock(1_000_000.0)
    other = TaskDomain(31337, "0x" + "44" * 20)
    header = TaskAuth(other, SENDER, clock=clock).sign_task("id-1", TASK_RUN_JOB, QUEUE, [1], {})
    with pytest.raises(TaskRefused, match="claims"):
        consumer(clock).check_task(TASK_RUN_JOB, QUEUE, [1], {}, header)


def test_a_reply_must_answer_a_task_sent_from_here_unaltered() -> None:
    clock = Clock(1_000_000.0)
    sender = TaskAuth(DOMAIN, SENDER, clock=clock)
    header = sender.sign_task("id-1", TASK_RUN_JOB, QUEUE, [1], {})
    worker = consumer(clock)
    nonce = bytes.fromhex(header["nonce"][2:])
    reply = worker.sign_reply("id-1", nonce, {"status": "committed"})
    assert sender.open_reply("id-1", reply, [WORKER.address]) == {"status": "committed"}
    with pytest.raises(TaskRefused, match="not by whom"):
        sender.open_reply("id-1", {**reply, "result": {"status": "failed"}}, [WORKER.address])
    with pytest.raises(TaskRefused, match="no such task"):
        sender.open_reply("id-2", worker.sign_reply("id-2", nonce, "x"), [WORKER.address])
    with pytest.raises(TaskRefused, match="not a signed reply"):
        sender.open_reply("id-1", "pong", [WORKER.address])


def test_rediss_urls_carry_their_tls_settings_and_nothing_else() -> None:
    url, tls = split_tls("rediss://h:6380/0?ssl_ca_certs=/ca.pem&ssl_cert_reqs=required")
    assert url == "rediss://h:6380/0" and tls == {"ssl_ca_certs": "/ca.pem", "ssl_cert_reqs": ssl.CERT_REQUIRED}
    assert split_tls("rediss://h/0")[1] == {"ssl_cert_reqs": ssl.CERT_REQUIRED}  # verified by default
    assert split_tls("redis://h/0") == ("redis://h/0", None)
    with pytest.raises(BadBrokerUrl, match="unknown broker URL parameters: password"):
        split_tls("rediss://h/0?password=x")
    with pytest.raises(BadBrokerUrl, match="ssl_cert_reqs"):
        split_tls("rediss://h/0?ssl_cert_reqs=maybe")
    assert user_url("rediss://admin:pw@h:1/0?ssl_ca_certs=/ca", "provider-0xab", "p/w") == \
        "rediss://provider-0xab:p%2Fw@h:1/0?ssl_ca_certs=/ca"


def test_a_providers_acl_names_its_own_prefix_only() -> None:
    address = "0x" + "Ab" * 20
    prefix = provider_keyprefix(address)
    assert prefix == f"provider.{address.lower()}:"
    patterns = [r for r in provider_acl_rules(address) if r[0] in "~&%"]
    assert patterns == [f"~{prefix}*", f"&{prefix}*"]


def test_a_task_that_ran_is_refused_as_replayed_after_the_worker_restarts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = Clock(1_000_000.0)
    header = TaskAuth(DOMAIN, SENDER, clock=clock, ttl_s=60).sign_task("id-1", TASK_RUN_JOB, QUEUE, [1], {})
    before_restart = consumer(clock, UsedNonces(tmp_path / "nonces.sqlite"))
    before_restart.mark_used(TaskSignature.from_json(header))  # it ran
    after_restart = consumer(clock, UsedNonces(tmp_path / "nonces.sqlite"))
    with pytest.raises(TaskRefused, match="replayed"):
        after_restart.check_task(TASK_RUN_JOB, QUEUE, [1], {}, header)
    clock.now += 61  # once its signature expired, the nonce is no longer kept (the expiry refuses it)
    after_restart.used.forget_expired(clock.now)
    assert TaskSignature.from_json(header).nonce not in UsedNonces(tmp_path / "nonces.sqlite")


def test_the_consumer_resends_only_what_the_dispatcher_sent_even_after_a_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """run_job signed by the provider's own key starts no job of its own choosing: it passes only
    as a re-send (retry, resumption) of arguments the dispatcher sent, remembered across restarts."""
    clock = Clock(1_000_000.0)
    own = TaskAuth(DOMAIN, WORKER, clock=clock)
    job, other = [{"jobId": 1}], [{"jobId": 2}]
    before_restart = consumer(clock, UsedNonces(tmp_path / "nonces.sqlite"))
    with pytest.raises(TaskRefused, match="may not send"):
        before_restart.check_task(TASK_RUN_JOB, QUEUE, job, {}, own.sign_task("a", TASK_RUN_JOB, QUEUE, job, {}))
    dispatched = TaskAuth(DOMAIN, SENDER, clock=clock).sign_task("b", TASK_RUN_JOB, QUEUE, job, {})
    before_restart.check_task(TASK_RUN_JOB, QUEUE, job, {}, dispatched)
    after_restart = consumer(clock, UsedNonces(tmp_path / "nonces.sqlite"))
    after_restart.check_task(TASK_RUN_JOB, QUEUE, job, {}, own.sign_task("c", TASK_RUN_JOB, QUEUE, job, {}))
    for task, args in ((TASK_RUN_JOB, other), (TASK_LEASE, job)):  # other arguments, another task
        with pytest.raises(TaskRefused, match="may not send"):
            after_restart.check_task(task, QUEUE, args, {}, own.sign_task("d", task, QUEUE, args, {}))
    clock.now += MAX_TTL_S + 1  # the memory ends a week after the last (re-)send
    after_restart.used.forget_expired(clock.now)
    with pytest.raises(TaskRefused, match="may not send"):
        after_restart.check_task(TASK_RUN_JOB, QUEUE, job, {}, own.sign_task("e", TASK_RUN_JOB, QUEUE, job, {}))
