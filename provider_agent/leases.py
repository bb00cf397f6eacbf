"""Hands a lease's GPUs to its renter and takes them back, driven by the chain.

`LeaseService.handle(lease_id)` is idempotent (Celery may deliver its task twice) and decides
from the chain alone what to do:
- active, not offered, inside the delivery window: fetch the renter's key from the backend, check
  its EIP-712 signature against the lease's renter on-chain (the backend is only a relay), fetch
  the image the key names (if any) through a content cache that checks its hash, create the
  environment (lease_env), sign the connection details, publish them through the backend and
  bind their hash on-chain (`offerAccess`); the miner yields. The renter's client confirms the
  delivery on-chain once it logged in (docs/PROTOCOL.md, "Lease delivery"). An image that cannot
  be had, is not what its hash says or does not unpack leaves the lease undelivered: it is never
  offered, and ends with a full refund at its delivery deadline;
- active and offered: make sure the environment runs (after an agent restart) and the miner yields;
- due (run out, or never offered by the delivery deadline) and still open on-chain: end it
  on-chain (`endLease`, which anyone may call then), so that the GPUs are free again and our pay
  and the renter's refund are credited; then as below;
- ended: remove the environment; the miner resumes once no lease of ours is open.

Nobody tells the agent that a lease ran out: `LeaseWatcher` (a thread the worker starts) follows
this provider's LeaseStarted events and, every `interval_s`, ends each lease that is due by the
chain's clock (the latest block's time), so the machine is wiped and the miner resumes seconds
after the end, however the chain's time moved.
"""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass
from pathlib import Path


from client.errors import ClientError, TransactionReverted
from client.log_follower import Event
from client.watched_ids import WatchedIds, open_state
from protocol.ids import LeaseId
from protocol.lease_access import NO_IMAGE, LeaseKey, LeaseMessageError, sign, typed_hash, verify
from provider_agent import ProviderAgentError
from provider_agent.backend_client import BackendClient
from provider_agent.cache import (ContentCache, ContentError, ContentSource, ContentUnavailable, DirectorySource,
                                  HttpSource)
from provider_agent.chain import ProviderChain
from provider_agent.lease_env import LeaseEnvironments, LeaseImageRefused
from provider_agent.mining import MiningSupervisor
from provider_agent.settings import Settings

log = logging.getLogger(__name__)


class LeaseKeyMissing(ProviderAgentError):
    """The renter has not bound a (validly signed) SSH key to the lease yet: ask again later."""


@dataclass(frozen=True)
class LeaseStep:
    outcome: str  # handed over | not delivered | released | not ours
    check_again_in_s: int | None  # when the lease needs looking at again (its end), if it does


class LeaseService:
    def __init__(self, chain: ProviderChain, backend: BackendClient | None, envs: LeaseEnvironments,
                 mining: MiningSupervisor | None, images: ContentCache | None = None) -> None:
        self.chain, self.backend, self.envs, self.mining = chain, backend, envs, mining
        self.images = images  # renters' images by content hash (None: only the default system)
        # The Celery task and the watcher thread may look at one lease at once: one at a time.
        self._lock = threading.RLock()

    @classmethod
    def build(cls, settings: Settings, chain: ProviderChain, backend: BackendClient | None, gpus: int,
              mining: MiningSupervisor | None) -> "LeaseService":
        envs = LeaseEnvironments(settings.leases_dir, gpus, settings.lease_public_host or socket.gethostname(),
                                 settings.lease_listen_host, disk_bytes=settings.lease_disk_bytes)
        source: ContentSource | None = None
        if settings.content_dir is not None:
            source = DirectorySource(settings.content_dir)
        elif backend is not None:  # signed in: the backend serves an image to the provider of a lease naming it
            source = HttpSource(backend.base_url, "/lease-images/{hash}", auth=backend.session)
        images = ContentCache(settings.lease_images_dir, settings.lease_image_bytes, source) if source else None
        return cls(chain, backend, envs, mining, images)

    def handle(self, lease_id: int) -> LeaseStep:
        with self._lock:
            return self._handle(lease_id)

    def _handle(self, lease_id: int) -> LeaseStep:
        lease = self.chain.lease(LeaseId(lease_id))
        if lease["provider"].lower() != self.chain.address.lower():
            return LeaseStep("not ours", None)
        if lease["due"]:
            self._end(lease_id)
            return self._release(lease_id)
        if not lease["active"]:
            return self._release(lease_id)
        if self.mining is not None:
            self.mining.lease_started()
        state = self.envs.state(lease_id)
        if state is None:
            key = self._renter_key(lease_id, lease["renter"])
            try:
                state = self.envs.start(lease_id, lease["gpu_count"], key.ssh_public_key, image=self._image(key))
            except LeaseImageRefused as exc:
                # Never offered: the lease ends at its delivery deadline and the renter gets it all back.
                log.error("lease %s: not delivered: the renter's image %s is refused: %s", lease_id, key.image, exc)
                return LeaseStep("not delivered", None)
        if not lease["offered"]:
            domain = self.chain.lease_domain()
            access = state.access()
            signature = sign(domain, access, self.chain.account.key)
            try:
                if self.backend is not None:
                    self.backend.publish_lease_access(lease_id, access.message(), signature)
                self.chain.offer_access(LeaseId(lease_id), typed_hash(domain, access))
            except Exception:
                # Not offered (e.g. the window closed meanwhile): no machine may outlive that;
                # a retry of the task builds it again if the lease can still be delivered.
                self.envs.stop(lease_id)
                raise
            log.info("lease %s: offered to %s at %s:%s", lease_id, lease["renter"], access.host, access.port)
        return LeaseStep("handed over", max(1, lease["ends_at"] - lease["now"]))

    def sweep(self, lease_ids: list[int]) -> list[int]:
        """Ends on-chain every lease of `lease_ids` that is due and releases every one that ended
        (environment removed, miner resumed when none is left); returns the ids that are over."""
        over = []
        with self._lock:
            for lease_id in lease_ids:
                lease = self.chain.lease(LeaseId(lease_id))
                if lease["provider"].lower() != self.chain.address.lower():
                    over.append(lease_id)
                elif lease["due"] or lease["ended"]:
                    if lease["due"]:
                        self._end(lease_id)
                    self._release(lease_id)
                    over.append(lease_id)
        return over

    def _end(self, lease_id: int) -> None:
        try:
            receipt = self.chain.end_lease(LeaseId(lease_id))
            log.info("lease %s: ran out (or was never offered); ended on-chain in tx %s", lease_id,
                     bytes(receipt["transactionHash"]).hex())
        except TransactionReverted as exc:
            if exc.error != "LeaseManagerNotActive":  # the renter (or anyone) ended it first: fine
                raise

    def _release(self, lease_id: int) -> LeaseStep:
        self.envs.stop(lease_id)
        if self.mining is not None and not self.chain.is_leased():
            self.mining.lease_ended()
        return LeaseStep("released", None)

    def _image(self, key: LeaseKey) -> Path | None:
        """The image the renter signed for, fetched and checked against its hash; None: the default
        system. A source that cannot answer now raises ContentUnavailable (the task retries)."""
        if not key.has_image:
            return None
        if self.images is None:
            raise LeaseImageRefused(f"lease {key.lease_id}: no content source configured to fetch images from")
        try:
            return self.images.path(key.image)
        except ContentUnavailable:
            raise
        except ContentError as exc:  # missing (after the source's retries), another hash, too large
            raise LeaseImageRefused(f"lease {key.lease_id}: {exc}") from exc

    def _renter_key(self, lease_id: int, renter: str) -> LeaseKey:
        """The SSH key and image the lease's renter signed for this lease (and no other)."""
        if self.backend is None:
            raise LeaseKeyMissing(f"lease {lease_id}: no backend configured to fetch the renter's SSH key from")
        row = self.backend.lease(lease_id)
        if not row.get("ssh_public_key") or not row.get("key_signature"):
            raise LeaseKeyMissing(f"lease {lease_id}: the renter has not bound an SSH key yet")
        try:
            key = LeaseKey(lease_id, row["ssh_public_key"], row.get("image") or NO_IMAGE)
            verify(self.chain.lease_domain(), key, bytes.fromhex(row["key_signature"][2:]), renter)
        except LeaseMessageError as exc:
            raise LeaseKeyMissing(f"lease {lease_id}: refused the relayed key: {exc}") from exc
        return key


class LeaseWatcher:
    """Ends this provider's leases once they are due by the chain's clock, and releases them
    (LeaseService.sweep), every `interval_s`, in a thread of its own. The leases come from
    LeaseStarted events for this provider, followed in the agent's state file (a restart picks
    up where it stopped), plus any environment found on disk."""

    def __init__(self, leases: LeaseService, state_db: Path | None, interval_s: float = 2.0) -> None:
        self.leases, self.state_db, self.interval_s = leases, state_db, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watched: WatchedIds | None = None

    def _ids(self) -> WatchedIds:
        if self._watched is None:
            chain = self.leases.chain
            me = chain.address.lower()

            def ours(event: Event) -> tuple[str, int] | None:
                return ("lease", int(event.args["leaseId"])) if event.args["provider"].lower() == me else None

            self._watched = WatchedIds(chain.web3, chain.deployment, open_state(self.state_db), f"leases-of-{me}",
                                       {"LeaseManager": ["LeaseStarted"]}, ours)
        return self._watched

    def run_once(self) -> list[int]:
        """One sweep; returns the leases found over (and no longer watched)."""
        watched = self._ids()
        watched.refresh()
        ids = sorted(set(watched.ids("lease")) | set(self.leases.envs.lease_ids()))
        over = self.leases.sweep(ids)
        watched.forget("lease", over)
        return over

    def start(self) -> "LeaseWatcher":
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="lease-watcher", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except (ClientError, ProviderAgentError, OSError) as exc:  # node down, env busy: next round
                log.warning("lease watcher: sweep failed, again in %.1f s: %s", self.interval_s, exc)
            except Exception:  # never let the thread die: a lease nobody ends keeps the GPUs and the miner idle
                log.exception("lease watcher: sweep failed, again in %.1f s", self.interval_s)
            self._stop.wait(self.interval_s)


__all__ = ["LeaseKeyMissing", "LeaseService", "LeaseStep", "LeaseWatcher"]
