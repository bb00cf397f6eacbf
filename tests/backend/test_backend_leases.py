"""The backend relays a lease's hand-over: the renter's SSH key and the provider's connection
details, each accepted only with the EIP-712 signature of the party the chain names."""

from __future__ import annotations

import backend_support as support
import pytest
from eth_account import Account
from fastapi.testclient import TestClient

from backend.api.app import create_app
from protocol.lease_access import LeaseAccess, LeaseDomain, LeaseKey, sign
from devtools.market import DEV_MNEMONIC

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4FtkBhVh9PV0c5uSNIk2ZNAcI0fwBVh7Zl8J4a1mV6 renter@laptop"
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH1U6K3nQ8cUOnQyg0y6XmB0H4m7mKkq3CgYyR4xQ0Zr attacker@box"
FINGERPRINT = "SHA256:" + "A" * 43


def _account(index: int):  # type: ignore[no-untyped-def]
    Account.enable_unaudited_hdwallet_features()
    return Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")


@pytest.fixture(scope="module")
def lease(chain, market, session, tmp_path_factory):  # type: ignore[no-untyped-def]
    """An active lease of provider2 by the renter, indexed; the app client and the signing domain."""
    leases = session.contract("LeaseManager")
    cost = leases.functions.leaseCost(market.provider2, 1, 3600).call()
    session.send(leases.functions.startLease(market.provider2, 1, 3600), market.renter, value=cost)
    lease_id = leases.functions.leaseCount().call()
    settings = support.make_settings(chain, tmp_path_factory.mktemp("leases"))
    with TestClient(create_app(settings)) as client:
        client.app.state.backend.make_indexer().sync()
        yield client, lease_id, LeaseDomain(session.web3.eth.chain_id, leases.address)


def _key_body(domain: LeaseDomain, lease_id: int, key: str, signer_index: int) -> dict[str, str]:
    return {"sshPublicKey": key, "signature": "0x" + sign(domain, LeaseKey(lease_id, key), _account(signer_index).key).hex()}


def test_renter_binds_its_key_and_no_one_else_can(lease) -> None:  # type: ignore[no-untyped-def]
    client, lease_id, domain = lease
    # Attack: the provider (or anyone) puts its own key on the renter's lease.
    forged = client.put(f"/leases/{lease_id}/key", json=_key_body(domain, lease_id, OTHER_KEY, 2))
    assert forged.status_code == 403 and "not by" in forged.json()["detail"]
    # Attack: a signature for another lease replayed on this one.
    replayed = _key_body(domain, lease_id + 1, KEY, 3) | {"sshPublicKey": KEY}
    assert client.put(f"/leases/{lease_id}/key", json=replayed).status_code == 403
    assert client.put(f"/leases/{lease_id}/key", json=_key_body(domain, lease_id, KEY, 3)).status_code == 204
    row = client.get(f"/leases/{lease_id}").json()
    assert row["ssh_public_key"] == KEY and row["key_signature"].startswith("0x")
    # The renter's own second key is refused too: the provider may already have installed the first.
    assert client.put(f"/leases/{lease_id}/key", json=_key_body(domain, lease_id, OTHER_KEY, 3)).status_code == 409


def test_only_the_lease_provider_publishes_connection_details(lease) -> None:  # type: ignore[no-untyped-def]
    client, lease_id, domain = lease
    access = LeaseAccess(lease_id, "gpu.example.org", 40022, "root", FINGERPRINT)
    body = {"host": access.host, "port": access.port, "user": access.user, "hostKeyFingerprint": FINGERPRINT}
    # Attack: someone else points the renter at a machine of theirs.
    fake = {**body, "signature": "0x" + sign(domain, access, _account(1).key).hex()}
    assert client.put(f"/leases/{lease_id}/access", json=fake).status_code == 403
    real = {**body, "signature": "0x" + sign(domain, access, _account(2).key).hex()}
    assert client.put(f"/leases/{lease_id}/access", json=real).status_code == 204
    assert client.get(f"/leases/{lease_id}").json()["access"] == access.message()


def test_a_key_for_an_unknown_lease_or_a_malformed_key_is_refused(lease) -> None:  # type: ignore[no-untyped-def]
    client, lease_id, domain = lease
    assert client.put("/leases/999/key", json=_key_body(domain, 999, KEY, 3)).status_code == 404
    bad = {"sshPublicKey": "not a key", "signature": "0x" + "11" * 65}
    assert client.put(f"/leases/{lease_id}/key", json=bad).status_code == 403
