"""EIP-712 lease messages: who signed, for which lease, in which deployment."""

from __future__ import annotations

import pytest
from eth_account import Account

from protocol.lease_access import (NO_IMAGE, LeaseAccess, LeaseDomain, LeaseKey, LeaseMessageError, normalize_ssh_key,
                                   recover, sign, typed_hash, verify)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4FtkBhVh9PV0c5uSNIk2ZNAcI0fwBVh7Zl8J4a1mV6 renter@laptop"
DOMAIN = LeaseDomain(31337, "0x" + "12" * 20)
IMAGE = "0x" + "ab" * 32
RENTER = Account.from_key(b"\x01" * 32)
OTHER = Account.from_key(b"\x02" * 32)


def test_the_renter_signature_binds_key_lease_and_deployment():
    key = LeaseKey(7, KEY)
    signature = sign(DOMAIN, key, RENTER.key)
    verify(DOMAIN, key, signature, RENTER.address)
    assert recover(DOMAIN, key, signature) == RENTER.address
    with pytest.raises(LeaseMessageError, match="not by"):
        verify(DOMAIN, key, signature, OTHER.address)
    # Attack: the same signature replayed for another lease, another key, another chain or contract.
    for forged_domain, forged in ((DOMAIN, LeaseKey(8, KEY)), (DOMAIN, LeaseKey(7, KEY.replace("renter", "thief"))),
                                  (LeaseDomain(1, DOMAIN.lease_manager), key), (LeaseDomain(31337, "0x" + "13" * 20), key)):
        assert recover(forged_domain, forged, signature) != RENTER.address


def test_the_renter_signature_binds_the_image_it_chose():
    chosen = LeaseKey(7, KEY, IMAGE)
    signature = sign(DOMAIN, chosen, RENTER.key)
    verify(DOMAIN, chosen, signature, RENTER.address)
    assert LeaseKey(7, KEY).image == NO_IMAGE == "0x" + "00" * 32  # the provider's default root
    # Attack: the relay (or anyone) swaps the image for another one, or drops it, under the same signature.
    for swapped in (LeaseKey(7, KEY, "0x" + "cd" * 32), LeaseKey(7, KEY)):
        with pytest.raises(LeaseMessageError, match="not by"):
            verify(DOMAIN, swapped, signature, RENTER.address)


@pytest.mark.parametrize("image", ["ab" * 32, "0x" + "AB" * 32, "0x" + "ab" * 31, "0x" + "zz" * 32, ""])
def test_an_image_that_is_not_a_content_hash_is_refused(image):
    with pytest.raises(LeaseMessageError, match="image"):
        LeaseKey(7, KEY, image)


def test_access_digest_is_what_is_signed_and_differs_per_field():
    access = LeaseAccess(7, "gpu.example.org", 40022, "root", "SHA256:" + "A" * 43)
    signature = sign(DOMAIN, access, OTHER.key)
    verify(DOMAIN, access, signature, OTHER.address)
    digest = typed_hash(DOMAIN, access)
    assert len(digest) == 32
    assert Account._recover_hash(digest, signature=signature) == OTHER.address
    assert typed_hash(DOMAIN, LeaseAccess(7, "gpu.example.org", 40023, "root", "SHA256:" + "A" * 43)) != digest
    assert LeaseAccess.from_json(access.message()) == access


@pytest.mark.parametrize("text", ["", "-----BEGIN OPENSSH PRIVATE KEY-----", "ssh-ed25519", "ssh-dss AAAAB3 x",
                                  'command="sh" ssh-ed25519 AAAAC3 me', f"{KEY}\n{KEY}"])
def test_anything_but_one_public_key_line_is_refused(text):
    with pytest.raises(LeaseMessageError):
        normalize_ssh_key(text)


def test_malformed_access_and_signatures_are_refused():
    with pytest.raises(LeaseMessageError):
        LeaseAccess(7, "host; rm -rf /", 22, "root", "SHA256:" + "A" * 43)
    with pytest.raises(LeaseMessageError):
        LeaseAccess(7, "host", 70000, "root", "SHA256:" + "A" * 43)
    with pytest.raises(LeaseMessageError):
        recover(DOMAIN, LeaseKey(7, KEY), b"\x00" * 64)
    assert normalize_ssh_key(f"  {KEY}\n") == KEY
