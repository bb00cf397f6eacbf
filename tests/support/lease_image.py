"""A renter's lease image built offline: a root file system with Debian's static busybox
(busybox-static) and a marker file, packed as a tarball. Used by the lease tests."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from provider_agent.lease_env import _is_static

needs_busybox = pytest.mark.skipif(not _is_static(Path("/bin/busybox")),
                                   reason="needs busybox-static (scripts/setup.sh)")


def busybox_rootfs(directory: Path, marker: str) -> Path:
    """A renter's minimal image: a static busybox, its applets, a passwd, a marker file."""
    root = directory / "rootfs"
    (root / "bin").mkdir(parents=True)
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    for applet in ("sh", "ls", "cat", "id", "echo", "touch", "sleep", "grep", "dd", "rm", "df", "tr", "timeout"):
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\nrenter:x:1000:1000::/home/renter:/bin/sh\n")
    (root / "etc" / "renter-image").write_text(marker)
    return root


def tar(root: Path, target: Path, extra: list[tuple[tarfile.TarInfo, bytes | None]] = ()) -> Path:
    with tarfile.open(target, "w:gz") as archive:
        archive.add(root, arcname=".")
        for info, data in extra:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return target


__all__ = ["busybox_rootfs", "needs_busybox", "tar"]
