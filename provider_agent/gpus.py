"""Which devices this box can prove: CUDA GPUs (named and identified through NVML when
nvidia-ml-py is installed, else through torch) and the CPU as a class of its own.

A device's UUID is what PoG binds a seed to (DESIGN.md requirement 6), so it must come from
the driver, never from configuration.
"""

from __future__ import annotations

import logging
import platform
import uuid as uuidlib
from dataclasses import dataclass
from pathlib import Path

import torch

from protocol.merkle import Hash32, keccak256
from protocol.pog.identity import DeviceIdentity
from provider_agent import ProviderAgentError
from provider_agent.identity import nvml_identities

logger = logging.getLogger(__name__)


class UnknownDevice(ProviderAgentError):
    """A device spec (`cpu`, `cuda:N`) names no device present on this machine."""

    def __init__(self, spec: str, reason: str) -> None:
        super().__init__(f"device {spec!r}: {reason}")
        self.spec = spec
        self.reason = reason


@dataclass(frozen=True)
class Device:
    """One provable device."""

    spec: str
    name: str
    uuid: str
    memory_bytes: int
    identity: DeviceIdentity | None = None  # NVML's word, sent with each PoG round; None without NVML

    @property
    def is_cpu(self) -> bool:
        return self.spec == "cpu"

    @property
    def uuid_hash(self) -> Hash32:
        """The bytes32 the round's per-GPU seed is bound to."""
        return keccak256(self.uuid.encode())


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _machine_id() -> str:
    try:
        return Path("/etc/machine-id").read_text().strip()
    except OSError:
        return f"{uuidlib.getnode():012x}"


def cpu_device(device_id: str | None = None) -> Device:
    """The CPU as a device; its name starts with `cpu` so that it maps to the CPU class. Its
    identity is the machine's id unless `device_id` is given (several providers simulated on one
    machine: the registry refuses one device for two accounts)."""
    try:
        memory = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        memory = 0
    return Device("cpu", f"cpu {_cpu_model()}", f"CPU-{device_id or _machine_id()}", memory)


def cuda_devices() -> list[Device]:
    """CUDA devices in torch's order, named by NVML when it knows the same UUID."""
    if not torch.cuda.is_available():
        return []
    nvml = nvml_identities()
    if not nvml:
        logger.warning("NVML unavailable (nvidia-ml-py and the driver's library): devices named by torch, "
                       "PoG rounds report no identity")
    devices = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        uuid = f"GPU-{props.uuid}"
        found = nvml.get(uuid)
        if found is None:
            devices.append(Device(f"cuda:{i}", props.name, uuid, int(props.total_memory)))
            continue
        identity = DeviceIdentity(found.name, found.uuid, found.memory_bytes, found.serial,
                                  found.driver_version, found.cc_mode)
        devices.append(Device(f"cuda:{i}", found.name, uuid, found.memory_bytes, identity))
    return devices


def detect(cpu_device_id: str | None = None) -> list[Device]:
    """Every GPU, or the CPU alone when there is none."""
    return cuda_devices() or [cpu_device(cpu_device_id)]


def resolve(spec: str) -> Device:
    """The device named by `cpu` or `cuda:N`."""
    if spec == "cpu":
        return cpu_device()
    for device in cuda_devices():
        if device.spec == spec:
            return device
    raise UnknownDevice(spec, "not present (torch sees no such CUDA device)")
