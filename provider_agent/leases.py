"""Hands a lease's GPUs to its renter and takes them back, driven by the chain.

`LeaseService.handle(lease_id)` is idempotent (Celery may deliver its task twice) and decides
from the chain alone what to do:
- active, undelivered, inside the delivery window: fetch the renter's key from the backend, check
  its EIP-712 signature against the lease's renter on-chain (the backend is only a relay), create
  the environment (lease_env), sign the connection details, publish them through the backend and
  confirm their hash on-chain (`confirmDelivery`); the miner yields;
- active and delivered: make sure the environment runs (after an agent restart) and the miner yields;
- ended, expired, or undelivered past the window: remove the environment; the miner resumes.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass

from protocol.lease_access import LeaseKey, LeaseMessageError, sign, typed_hash, verify
from provider_agent import ProviderAgentError
from provider_agent.backend_client import BackendClient
from provider_agent.chain import ProviderChain
from provider_agent.lease_env import LeaseEnvironments
from provider_agent.mining import MiningSupervisor
from provider_agent.settings import Settings

log = logging.getLogger(__name__)


class LeaseKeyMissing(ProviderAgentError):
    """The renter has not bound a (validly signed) SSH key to the lease yet: ask again later."""


@dataclass(frozen=True)
class LeaseStep:
    outcome: str  # handed over | released | not ours
    check_again_in_s: int | None  # when the lease needs looking at again (its end), if it does


class LeaseService:
    def __init__(self, chain: ProviderChain, backend: BackendClient | None, envs: LeaseEnvironments,
                 mining: MiningSupervisor | None) -> None:
        self.chain, self.backend, self.envs, self.mining = chain, backend, envs, mining

    @classmethod
    def build(cls, settings: Settings, chain: ProviderChain, backend: BackendClient | None, gpus: int,
              mining: MiningSupervisor | None) -> "LeaseService":
        envs = LeaseEnvironments(settings.leases_dir, gpus, settings.lease_public_host or socket.gethostname(),
                                 settings.lease_listen_host, disk_bytes=settings.lease_disk_bytes)
        return cls(chain, backend, envs, mining)

    def handle(self, lease_id: int) -> LeaseStep:
        lease = self.chain.lease(lease_id)
        if lease["provider"].lower() != self.chain.address.lower():
            return LeaseStep("not ours", None)
        now = self.chain.now()
        deliverable = lease["delivered"] or now < lease["delivery_deadline"]
        if not lease["active"] or not deliverable:
            self.envs.stop(lease_id)
            if self.mining is not None and not self.chain.contract("LeaseManager").functions.isLeased(
                    self.chain.address).call():
                self.mining.lease_ended()
            return LeaseStep("released", None)
        if self.mining is not None:
            self.mining.lease_started()
        state = self.envs.state(lease_id)
        if state is None:
            state = self.envs.start(lease_id, lease["gpu_count"], self._renter_key(lease_id, lease["renter"]))
        if not lease["delivered"]:
            domain = self.chain.lease_domain()
            access = state.access()
            signature = sign(domain, access, self.chain.account.key)
            try:
                if self.backend is not None:
                    self.backend.publish_lease_access(lease_id, access.message(), signature)
                self.chain.confirm_delivery(lease_id, typed_hash(domain, access))
            except Exception:
                # Not delivered (e.g. the window closed meanwhile): no machine may outlive that;
                # a retry of the task builds it again if the lease can still be delivered.
                self.envs.stop(lease_id)
                raise
            log.info("lease %s: delivered to %s at %s:%s", lease_id, lease["renter"], access.host, access.port)
        return LeaseStep("handed over", max(1, lease["ends_at"] - now))

    def _renter_key(self, lease_id: int, renter: str) -> str:
        """The SSH key the lease's renter signed for this lease (and no other)."""
        if self.backend is None:
            raise LeaseKeyMissing(f"lease {lease_id}: no backend configured to fetch the renter's SSH key from")
        row = self.backend.lease(lease_id)
        if not row.get("ssh_public_key") or not row.get("key_signature"):
            raise LeaseKeyMissing(f"lease {lease_id}: the renter has not bound an SSH key yet")
        key = LeaseKey(lease_id, row["ssh_public_key"])
        try:
            verify(self.chain.lease_domain(), key, bytes.fromhex(row["key_signature"][2:]), renter)
        except LeaseMessageError as exc:
            raise LeaseKeyMissing(f"lease {lease_id}: refused the relayed key: {exc}") from exc
        return key.ssh_public_key


__all__ = ["LeaseKeyMissing", "LeaseService", "LeaseStep"]
