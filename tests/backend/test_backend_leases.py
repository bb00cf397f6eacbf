"""The backend relays a lease's hand-over: the renter's SSH key and the provider's connection
details, each accepted only with the EIP-712 signature of the party the chain names."""

from __future__ import annotations

import io
import tarfile

import backend_support as support
import pytest
from eth_account import Account
from fastapi.testclient import TestClient

from backend.api.app import create_app
from client.backend_http import ApiError
from devtools.market import DEV_MNEMONIC
from renter.client import BackendClient
from protocol.lease_access import NO_IMAGE, LeaseAccess, LeaseDomain, LeaseKey, sign
from protocol.merkle import keccak256

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4FtkBhVh9PV0c5uSNIk2ZNAcI0fwBVh7Zl8J4a1mV6 renter@laptop"
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH1U6K3nQ8cUOnQyg0y6XmB0H4m7mKkq3CgYyR4xQ0Zr attacker@box"
FINGERPRINT = "SHA256:" + "A" * 43
MAX_IMAGE_BYTES = 64 * 1024
PROVIDER2, RENTER, STRANGER = 2, 3, 6  # anvil accounts: provider2 is the lease's provider


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
    settings = support.make_settings(chain, tmp_path_factory.mktemp("leases"), max_lease_image_bytes=MAX_IMAGE_BYTES)
    with TestClient(create_app(settings)) as client:
        client.app.state.backend.make_indexer().sync()
        yield client, lease_id, LeaseDomain(session.web3.eth.chain_id, leases.address)


def _key_body(domain: LeaseDomain, lease_id: int, key: str, signer_index: int, image: str = NO_IMAGE) -> dict[str, str]:
    signature = sign(domain, LeaseKey(lease_id, key, image), _account(signer_index).key)
    return {"sshPublicKey": key, "image": image, "signature": "0x" + signature.hex()}


@pytest.fixture
def another_lease(lease, session, market):  # type: ignore[no-untyped-def]
    """A fresh active lease of provider2 by the renter (indexed), ended after the test."""
    client = lease[0]
    leases = session.contract("LeaseManager")
    cost = leases.functions.leaseCost(market.provider2, 1, 3600).call()
    session.send(leases.functions.startLease(market.provider2, 1, 3600), market.renter, value=cost)
    client.app.state.backend.make_indexer().sync()
    lease_id = int(leases.functions.leaseCount().call())
    yield lease_id
    session.send(leases.functions.endLease(lease_id), market.renter)


def _image(marker: str) -> bytes:
    """A (tiny) root file system tarball holding a marker file."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        info = tarfile.TarInfo("./etc/renter-image")
        info.size = len(marker.encode())
        archive.addfile(info, io.BytesIO(marker.encode()))
    return out.getvalue()


def _as(client: TestClient, index: int) -> BackendClient:
    return BackendClient(client, support.anvil_key(index))


def _read_image(client: TestClient, index: int, content_hash: str) -> int:
    party = _as(client, index)
    return party.http.get(f"/lease-images/{content_hash}", headers=party._auth()).status_code


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


def test_a_renters_image_is_read_by_it_and_by_its_leases_provider_only(lease, another_lease) -> None:  # type: ignore[no-untyped-def]
    client, _, domain = lease
    lease_id = another_lease
    data = _image("renter's image\n")
    image = _as(client, RENTER).upload_lease_image(data)
    assert image == "0x" + keccak256(data).hex()
    assert _read_image(client, RENTER, image) == 200
    # Attack: a third party (or the provider before any lease names it) who learnt the hash reads it.
    assert _read_image(client, STRANGER, image) == 404
    assert _read_image(client, PROVIDER2, image) == 404
    assert client.get(f"/lease-images/{image}").status_code == 401
    bound = client.put(f"/leases/{lease_id}/key", json=_key_body(domain, lease_id, KEY, RENTER, image))
    assert bound.status_code == 204, bound.text
    assert client.get(f"/leases/{lease_id}").json()["image"] == image
    provider = _as(client, PROVIDER2)
    assert provider.http.get(f"/lease-images/{image}", headers=provider._auth()).content == data
    assert _read_image(client, 1, image) == 404  # another provider, no lease of it names the image
    assert _read_image(client, STRANGER, image) == 404
    # Attack: the relay swaps the bound image (the provider re-checks the signature; the backend refuses it).
    other = _as(client, RENTER).upload_lease_image(_image("another\n"))
    swapped = _key_body(domain, lease_id, KEY, RENTER, image) | {"image": other}
    assert client.put(f"/leases/{lease_id}/key", json=swapped).status_code == 403
    assert client.put(f"/leases/{lease_id}/key", json=_key_body(domain, lease_id, KEY, RENTER, other)).status_code == 409


def test_a_key_naming_an_image_its_renter_did_not_upload_is_refused(lease, another_lease) -> None:  # type: ignore[no-untyped-def]
    client, _, domain = lease
    lease_id = another_lease
    # Attack: the renter names a private image of someone else whose hash it learnt, so that the
    # provider would fetch it and boot it where the renter can read it.
    private = _as(client, STRANGER).upload_lease_image(_image("someone else's secrets\n"))
    named = client.put(f"/leases/{lease_id}/key", json=_key_body(domain, lease_id, KEY, RENTER, private))
    assert named.status_code == 403 and "not uploaded by the lease's renter" in named.json()["detail"]
    assert _read_image(client, PROVIDER2, private) == 404
    # A hash nobody uploaded: refused now, not discovered by the provider after the renter paid.
    never = "0x" + keccak256(b"never uploaded").hex()
    assert client.put(f"/leases/{lease_id}/key", json=_key_body(domain, lease_id, KEY, RENTER, never)).status_code == 403
    assert client.get(f"/leases/{lease_id}").json()["ssh_public_key"] is None


@pytest.mark.parametrize(("data", "status", "says"), [
    (b"", 422, "empty"), (b"not a tarball at all", 422, "not a tar archive"),
    (b"\0" * 4096, 422, "no files"), (b"x" * (MAX_IMAGE_BYTES + 1), 413, f"limit is {MAX_IMAGE_BYTES}")])
def test_an_image_upload_that_is_no_tarball_or_too_large_is_refused(lease, data, status, says) -> None:  # type: ignore[no-untyped-def]
    client, _, _ = lease
    with pytest.raises(ApiError) as refused:
        _as(client, RENTER).upload_lease_image(data)
    assert refused.value.status == status and says in refused.value.detail, refused.value.detail
