"""The bubblewrap command line of a lease's sandbox, shared by the agent (provider_agent.lease_env)
and the GPU bench's lease check (devtools/bench_gpu.py). Standard library only: the bench runs it
on GPU machines that have torch and little else."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

SANDBOX_UID = 1000  # the renter's uid inside the sandbox's user namespace
GPU_CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
# What a full lease runs besides bubblewrap (lease_env.LeaseEnvironments.check_tools).
LEASE_TOOLS = ("bwrap", "sshd", "ssh-keygen", "setpriv", "slirp4netns", "ip", "nsenter")


def gpu_device_nodes(dev_dir: Path, gpu_indices: list[int]) -> list[Path]:
    """The device nodes a sandbox needs for exactly these GPUs: /dev/nvidia<i> for each leased
    index and the shared control nodes, among those that exist (none on a machine without GPUs)."""
    wanted = [f"nvidia{i}" for i in gpu_indices] + list(GPU_CONTROL_NODES)
    return [dev_dir / name for name in wanted if (dev_dir / name).exists()]


def cuda_visible_devices(gpu_indices: list[int]) -> str:
    return ",".join(str(i) for i in gpu_indices)


def device_binds(devices: Sequence[tuple[str, str]]) -> list[str]:
    """bubblewrap's arguments that bind each (source, name) device node at /dev/name."""
    return [arg for source, name in devices for arg in ("--dev-bind", source, f"/dev/{name}")]


def sandbox_argv(bwrap: str, root: Sequence[str], dev: Sequence[str], seccomp_fd: int, command: Sequence[str],
                 options: Sequence[str] = ()) -> list[str]:
    """bubblewrap's arguments for a lease's sandbox: every namespace unshared, the user's included,
    with no user namespace inside it (--disable-userns); the renter as SANDBOX_UID in a session of
    its own; `root`, the arguments that build its file system; a /dev of bwrap's filled by `dev`
    (device_binds...), then read-only; its own /proc; the seccomp filter read from `seccomp_fd`;
    `options` (--chdir, --setenv, --info-fd...); `command`."""
    return [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_UID), "--new-session", "--hostname", "lease", *root, "--dev", "/dev", *dev,
            "--remount-ro", "/dev", "--proc", "/proc", "--seccomp", str(seccomp_fd), *options, "--", *command]


__all__ = ["GPU_CONTROL_NODES", "LEASE_TOOLS", "SANDBOX_UID", "cuda_visible_devices", "device_binds",
           "gpu_device_nodes", "sandbox_argv"]
