"""Renters' lease images: root file system tarballs a lease's machine boots instead of the
provider's default system (docs/PROTOCOL.md, "Lease hand-over").

An image is named by the keccak256 of its bytes and named by the renter in the EIP-712 LeaseKey
it signs for a lease, so neither this backend nor anybody else can swap it: the provider's agent
checks the bytes it fetches against the name. Images are private: each is served to whoever
uploaded those bytes, and to the provider of a lease whose renter uploaded them and signed a key
naming them; to anybody else (who may have learnt the hash) it does not exist.
"""

from __future__ import annotations

import logging
import tarfile

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from backend import models as m
from backend.auth import utcnow
from backend.errors import BadInput, NotFound
from backend.storage import Upload

log = logging.getLogger(__name__)


def check_tarball(upload: Upload) -> None:
    """Refuses bytes that are not a tar archive (plain or compressed) with at least one member:
    a renter learns it before paying, not from a lease that was never delivered. Only the first
    header is read; what the members hold (links out of the root, its unpacked size) is the
    provider's to refuse when it unpacks the image on the lease's bounded disk."""
    try:
        with tarfile.open(upload.temp, "r:*") as archive:
            first = archive.next()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BadInput(f"lease image: not a tar archive of a root file system ({exc})") from exc
    if first is None:
        raise BadInput("lease image: the archive holds no files")


def store_lease_image(session: Session, owner: str, upload: Upload) -> m.LeaseImage:
    if not upload.size:
        raise BadInput("lease image is empty")
    check_tarball(upload)
    digest = upload.keep()
    row = session.get(m.LeaseImage, (digest, owner))
    if row is None:
        row = m.LeaseImage(content_hash=digest, owner=owner, size=upload.size, created_at=utcnow())
        session.add(row)
        session.commit()
    log.info("lease image %s (%s bytes) stored for %s", digest, upload.size, owner)
    return row


def holds_image(session: Session, content_hash: str, account: str) -> bool:
    return session.get(m.LeaseImage, (content_hash, account)) is not None


def image_for(session: Session, content_hash: str, viewer: str) -> m.LeaseImage:
    """The image, for its uploader or for the provider of a lease whose renter uploaded it and
    bound it to the lease (PUT /leases/{id}/key checked the renter's signature); NotFound for
    anybody else, as for an image that does not exist, so that a private image does not leak."""
    own = session.get(m.LeaseImage, (content_hash, viewer))
    if own is not None:
        return own
    leased = session.scalars(select(m.LeaseImage).join(m.Lease, and_(
        m.Lease.image == m.LeaseImage.content_hash, m.Lease.renter == m.LeaseImage.owner)).where(
        m.LeaseImage.content_hash == content_hash, m.Lease.provider == viewer)).first()
    if leased is None:
        raise NotFound("lease image", content_hash)
    return leased
