"""The provider's agent boots the image its renter signed for (LeaseKey.image), fetched through a
content cache that checks its hash; an image it cannot have, that is not what its hash says, or
that does not unpack leaves the lease undelivered (never offered on-chain: the renter is refunded
in full), and the agent goes on serving other leases.

Real anvil chain, real agent chain client, real lease environments (bubblewrap, sshd) and a real
ssh client. The backend that relays the renter's signed key is played by the test (`Relay`): it
is untrusted, and some tests make it lie."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from client.contracts import emitted
from protocol.lease_access import LeaseKey, sign
from provider_agent.agent import Agent
from provider_agent.cache import ContentCache, DirectorySource
from provider_agent.lease_env import LeaseEnvironments
from provider_agent.leases import LeaseKeyMissing, LeaseService
from tests.support.accounts import dev_account
from tests.support.lease_image import busybox_rootfs, needs_busybox, tar

pytestmark = [pytest.mark.skipif(
    os.getuid() != 0 or not all(shutil.which(t) or Path(f"/usr/sbin/{t}").exists()
                                for t in ("bwrap", "sshd", "ssh", "ssh-keygen", "slirp4netns", "setpriv", "ip")),
    reason="needs root, bubblewrap, OpenSSH, slirp4netns and iproute2 (scripts/setup.sh)"), needs_busybox]

RENTER_INDEX = 3  # anvil's account 3: the market's renter


class Relay:
    """What the agent asks the backend for: the lease's row (the renter's signed key and image),
    and where it publishes its signed connection details."""

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, Any]] = {}
        self.published: dict[int, dict[str, Any]] = {}

    def bind(self, domain, lease_id: int, ssh_key: str, image: str) -> None:  # type: ignore[no-untyped-def]
        signature = sign(domain, LeaseKey(lease_id, ssh_key, image), dev_account(RENTER_INDEX).key)
        self.rows[lease_id] = {"ssh_public_key": ssh_key, "image": image, "key_signature": "0x" + signature.hex()}

    def lease(self, lease_id: int) -> dict[str, Any]:
        return self.rows.get(lease_id, {})

    def publish_lease_access(self, lease_id: int, access: dict[str, Any], signature: bytes) -> None:
        self.published[lease_id] = access


@pytest.fixture
def provider(settings_for, tmp_path):  # type: ignore[no-untyped-def]
    """The agent's lease service over the chain, a test relay, and a content directory the
    images are fetched from (what the backend's /lease-images serves, by content hash)."""
    settings = settings_for()
    agent = Agent.build(settings)
    agent.register()
    relay = Relay()
    envs = LeaseEnvironments(settings.leases_dir, 1, "127.0.0.1", "127.0.0.1", memory_bytes=4 << 30,
                             disk_bytes=256 << 20)
    source = DirectorySource(settings.content_dir)
    service = LeaseService(agent.chain, relay, envs, None, ContentCache(tmp_path / "images", 64 << 20, source))
    yield service, relay, source
    for lease_id in envs.lease_ids():
        envs.stop(lease_id)


@pytest.fixture
def ssh_key(tmp_path) -> Path:  # type: ignore[no-untyped-def]
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True)
    return tmp_path / "id"


def _start_lease(market) -> int:  # type: ignore[no-untyped-def]
    leases = market.session.contract("LeaseManager")
    cost = leases.functions.leaseCost(market.provider, 1, 3600).call()
    receipt = market.session.send(leases.functions.startLease(market.provider, 1, 3600), market.renter, value=cost)
    return emitted(leases, "LeaseStarted", receipt)[0]["args"]["leaseId"]


def _end_lease(market, lease_id: int) -> None:  # type: ignore[no-untyped-def]
    market.session.send(market.session.contract("LeaseManager").functions.endLease(lease_id), market.renter)


def _offered(market, lease_id: int) -> bool:  # type: ignore[no-untyped-def]
    return market.session.contract("LeaseManager").functions.getDelivery(lease_id).call().offeredAt != 0


def _ssh(key: Path, port: int, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                           "-o", "LogLevel=ERROR", "-p", str(port), "root@127.0.0.1", command],
                          capture_output=True, text=True, timeout=60)


def test_the_lease_boots_the_image_its_renter_signed_for(provider, market, ssh_key, tmp_path):  # type: ignore[no-untyped-def]
    service, relay, source = provider
    image = source.put(tar(busybox_rootfs(tmp_path, "the renter's image\n"), tmp_path / "image.tar.gz").read_bytes())
    lease_id = _start_lease(market)
    relay.bind(service.chain.lease_domain(), lease_id, ssh_key.with_suffix(".pub").read_text().strip(), image)
    try:
        assert service.handle(lease_id).outcome == "handed over"
        assert _offered(market, lease_id)
        shown = _ssh(ssh_key, relay.published[lease_id]["port"], "cat /etc/renter-image; ls /usr 2>&1; echo end")
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0] == "the renter's image" and "No such file" in lines[1], shown.stdout  # not the host's /usr
    finally:
        _end_lease(market, lease_id)
        service.handle(lease_id)


def test_an_image_other_than_the_signed_one_is_never_booted(provider, market, ssh_key, tmp_path, caplog):  # type: ignore[no-untyped-def]
    service, relay, source = provider
    signed = source.put(tar(busybox_rootfs(tmp_path / "a", "signed\n"), tmp_path / "a.tar.gz").read_bytes())
    other = source.put(tar(busybox_rootfs(tmp_path / "b", "swapped\n"), tmp_path / "b.tar.gz").read_bytes())
    public_key = ssh_key.with_suffix(".pub").read_text().strip()
    lease_id = _start_lease(market)
    try:
        # Attack: the backend relays the renter's signed key with another image in the row.
        relay.bind(service.chain.lease_domain(), lease_id, public_key, signed)
        relay.rows[lease_id]["image"] = other
        with pytest.raises(LeaseKeyMissing, match="signed by"):
            service.handle(lease_id)
        # Attack: whoever serves the content (the backend's store, its operator) swaps the bytes.
        relay.bind(service.chain.lease_domain(), lease_id, public_key, signed)
        (source.root / signed).write_bytes((source.root / other).read_bytes())
        with caplog.at_level(logging.ERROR, logger="provider_agent.leases"):
            assert service.handle(lease_id).outcome == "not delivered"
        assert f"lease {lease_id}: not delivered: the renter's image {signed} is refused" in caplog.text
        assert "hashes to" in caplog.text
        assert not _offered(market, lease_id) and service.envs.lease_ids() == []
    finally:
        _end_lease(market, lease_id)
        service.handle(lease_id)


def test_an_image_that_is_missing_or_does_not_unpack_is_not_delivered(provider, market, ssh_key, tmp_path):  # type: ignore[no-untyped-def]
    service, relay, source = provider
    public_key = ssh_key.with_suffix(".pub").read_text().strip()
    rootfs = busybox_rootfs(tmp_path, "evil\n")
    link = tarfile.TarInfo("./hostlink")
    link.type, link.linkname = tarfile.SYMTYPE, str(tmp_path / "host")
    through = tarfile.TarInfo("./hostlink/planted")
    through.size = 5
    escaping = source.put(tar(rootfs, tmp_path / "evil.tar.gz", [(link, None), (through, b"owned")]).read_bytes())
    never_uploaded = "0x" + "5a" * 32
    (tmp_path / "host").mkdir()
    for image in (escaping, never_uploaded):
        lease_id = _start_lease(market)
        relay.bind(service.chain.lease_domain(), lease_id, public_key, image)
        try:
            assert service.handle(lease_id).outcome == "not delivered"
            assert not _offered(market, lease_id) and service.envs.lease_ids() == []
        finally:
            _end_lease(market, lease_id)
            service.handle(lease_id)
    assert not (tmp_path / "host" / "planted").exists()
    # The agent goes on: the next lease, without an image, is delivered.
    lease_id = _start_lease(market)
    relay.bind(service.chain.lease_domain(), lease_id, public_key, "0x" + "00" * 32)
    try:
        assert service.handle(lease_id).outcome == "handed over" and _offered(market, lease_id)
    finally:
        _end_lease(market, lease_id)
        service.handle(lease_id)
