"""Which devices this box can prove: CUDA GPUs (named and identified through NVML when
pynvml is installed, else through torch) and the CPU as a class of its own.

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
from provider_agent import ProviderAgentError

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


def _nvml_devices() -> dict[str, tuple[str, int]]:
    """UUID (without the `GPU-` prefix) -> (name, memory) from NVML, or {} without pynvml."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        logger.warning("NVML unavailable, using torch device names: %s", err)
        return {}
    found = {}
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            name = name.decode() if isinstance(name, bytes) else name
            uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
            found[uuid.removeprefix("GPU-")] = (name, pynvml.nvmlDeviceGetMemoryInfo(handle).total)
    finally:
        pynvml.nvmlShutdown()
    return found


def cuda_devices() -> list[Device]:
    """CUDA devices in torch's order, named by NVML when it knows the same UUID."""
    if not torch.cuda.is_available():
        return []
    nvml = _nvml_devices()
    devices = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        bare = str(props.uuid)
        name, memory = nvml.get(bare, (props.name, props.total_memory))
        devices.append(Device(f"cuda:{i}", name, f"GPU-{bare}", int(memory)))
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
