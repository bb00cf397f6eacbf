"""Starts a lease's sandbox (run by the agent as root, as a script: `python -I -S lease_boot.py
CONFIG`; standard library only).

In a private mount namespace of its own (nothing it mounts is seen by the host or outlives the
sandbox) it
- mounts a tmpfs of the lease's disk share (`size=`; `nr_inodes=` bounds its files) at the
  staging directory: the sandbox's root file system (the renter's image unpacked, or a skeleton
  over which the host's system is bound read-only), its /tmp, its home and its /dev/shm all live
  in it, so together they can never hold more than the share;
- unpacks the renter's image there: a root file system as a directory, a tarball, or an OCI image
  layout (layers applied in order, whiteouts honoured); links and paths that leave the root,
  setuid bits and device nodes (the mount is nosuid, nodev) are refused or inert;
- bind-mounts what the sandbox needs from paths an unprivileged user cannot reach (the agent's
  Python under /root, device nodes) into the staging directory;
- drops to the lease's own unprivileged host user (no supplementary groups) and executes
  bubblewrap, which then builds the sandbox from the staging directory alone.
Errors go to stderr (a pipe the agent reads) and end it with status 2, or IMAGE_REFUSED (3) when
the renter's image is at fault.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_libc = ctypes.CDLL(None, use_errno=True)


class BootError(Exception):
    pass


class ImageRefused(BootError):
    """The renter's image cannot be the lease's root: it leaves the root, does not fit the disk or
    does not unpack (exit status IMAGE_REFUSED, so the agent tells it from its own failures)."""


IMAGE_REFUSED = 3


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    if _libc.mount(source and source.encode(), target.encode(), fstype and fstype.encode(), ctypes.c_ulong(flags),
                   data and data.encode()) != 0:
        errno = ctypes.get_errno()
        raise BootError(f"mount {source} on {target}: {os.strerror(errno)}")


def _safe_members(archive: tarfile.TarFile, root: Path, max_files: int) -> list[tarfile.TarInfo]:
    """The archive's members, less whiteouts, which are applied to `root` here (OCI layers).
    More than `max_files` members are refused as they are read: a small archive of millions of
    empty files would otherwise hold this process's memory and the tmpfs's inodes, which the
    disk's byte size does not bound."""
    keep = []
    for count, member in enumerate(archive, 1):
        if count > max_files:
            raise ImageRefused(f"image: more than {max_files} files, the most the lease's disk takes")
        name = member.name.lstrip("/")
        base = os.path.basename(name)
        if base.startswith(".wh."):
            parent = (root / os.path.dirname(name)).resolve()  # through links of earlier layers too
            hidden = base[len(".wh."):]
            if not parent.is_relative_to(root) or (base != ".wh..wh..opq" and hidden in ("", ".", "..")):
                raise ImageRefused(f"image: whiteout {member.name} leaves the root")
            if base == ".wh..wh..opq":
                for child in parent.iterdir() if parent.is_dir() else []:
                    _remove(child)
            else:
                _remove(parent / hidden)
            continue
        keep.append(member)
    return keep


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _extract(tar_path: Path, root: Path, max_files: int) -> None:
    with tarfile.open(tar_path, "r:*") as archive:  # plain or compressed, told by its header
        members = _safe_members(archive, root, max_files)
        archive.extractall(root, members=members, filter=_image_filter)


def _image_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's `tar` filter (no member outside the root, also through a link extracted before;
    no setuid/setgid or group/other write bits), which keeps absolute symbolic links (images are
    full of them; they resolve inside the sandbox), plus: no hard link to a file outside the root,
    no device node (the disk is nodev anyway)."""
    member = tarfile.tar_filter(member, dest)
    if member.islnk():
        target = os.path.realpath(os.path.join(dest, member.linkname))  # as tarfile joins it: absolute stays
        if os.path.commonpath([target, os.path.realpath(dest)]) != os.path.realpath(dest):
            raise tarfile.LinkOutsideDestinationError(member, target)
    if member.ischr() or member.isblk():
        return None
    return member


def unpack_image(image: Path, root: Path, max_files: int) -> None:
    """Puts the image's files under `root` (which exists and is empty)."""
    if (image / "oci-layout").is_file():
        index = json.loads((image / "index.json").read_text())
        manifest = json.loads(_blob(image, index["manifests"][0]["digest"]).read_text())
        for layer in manifest["layers"]:
            _extract(_blob(image, layer["digest"]), root, max_files)
    elif image.is_dir():
        shutil.copytree(image, root, symlinks=True, dirs_exist_ok=True)
    elif image.is_file():
        _extract(image, root, max_files)
    else:
        raise ImageRefused(f"image {image}: neither a directory, a tarball nor an OCI image layout")


def _blob(layout: Path, digest: str) -> Path:
    algorithm, _, value = digest.partition(":")
    if algorithm != "sha256" or not value.isalnum():
        raise ImageRefused(f"image: unsupported digest {digest!r}")
    return layout / "blobs" / "sha256" / value


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.lchown(root, uid, gid)
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            os.lchown(os.path.join(directory, name), uid, gid)


def boot(config: dict) -> None:
    stage = Path(config["stage"])
    uid, gid = int(config["uid"]), int(config["gid"])
    if _libc.unshare(CLONE_NEWNS) != 0:
        raise BootError(f"unshare(CLONE_NEWNS): {os.strerror(ctypes.get_errno())}")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted below propagates to the host
    stage.mkdir(mode=0o755, parents=True, exist_ok=True)
    _mount("unchained-lease", str(stage), "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    disk = stage / "disk"
    disk.mkdir()
    max_files = int(config["max_files"])
    _mount("unchained-lease-disk", str(disk), "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={int(config['disk_bytes'])},nr_inodes={max_files},mode=0755,uid={uid},gid={gid}")
    root = disk / "root"
    root.mkdir()
    try:
        if config.get("image"):
            unpack_image(Path(config["image"]), root, max_files)
        for sub, mode in (("proc", 0o555), ("dev", 0o755), ("tmp", 0o1777), ("etc", 0o755),
                          (config["home"].lstrip("/"), 0o700)):
            (root / sub).mkdir(mode=mode, parents=True, exist_ok=True)
        os.chmod(root / "tmp", 0o1777)
        resolv = root / "etc" / "resolv.conf"
        if resolv.is_symlink() or resolv.exists():
            _remove(resolv)
        resolv.write_text(f"nameserver {config['dns']}\n")  # slirp4netns' DNS forwarder
        (disk / "shm").mkdir(mode=0o1777)
        os.chmod(disk / "shm", 0o1777)
        _chown_tree(disk, uid, gid)
    except (OSError, tarfile.TarError, KeyError, ValueError) as exc:  # a filter's refusal is a TarError
        raise ImageRefused(f"image refused: it does not fit the lease's disk, leaves its root or cannot be "
                        f"unpacked ({type(exc).__name__}: {exc})") from exc
    binds = stage / "bind"
    binds.mkdir()
    for name, source, read_only in config["binds"]:
        target = binds / name
        if Path(source).is_dir():
            target.mkdir()
        else:
            target.touch()
        _mount(source, str(target), None, MS_BIND | MS_REC)
        if read_only:
            _mount(None, str(target), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    os.chdir("/")
    argv = config["argv"]
    os.execve(argv[0], argv, config["env"])


def main() -> None:
    try:
        boot(json.loads(Path(sys.argv[1]).read_text()))
    except (BootError, OSError) as exc:
        print(f"lease boot: {exc}", file=sys.stderr)
        sys.exit(IMAGE_REFUSED if isinstance(exc, ImageRefused) else 2)


if __name__ == "__main__":
    main()
