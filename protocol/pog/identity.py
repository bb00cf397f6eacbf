"""A PoG device's identity as its prover reports it with each round's answers (docs/PROTOCOL.md,
"Device identity"): what the NVIDIA driver (NVML) says the GPU is, and, where the GPU runs in
confidential-computing mode, its attestation evidence for the round's seed.

The identity is a claim (a driver or a proxy can say anything); only the evidence is signed, by a
key NVIDIA certifies, and it carries the nonce it was asked for. Both are parsed strictly here:
bounded printable ASCII, the versioned object's exact keys, sizes NVML itself cannot exceed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol.errors import ProtocolError

IDENTITY_VERSION = 1
# The driver's confidential-computing state (provider_agent.identity reads it from NVML).
CC_MODES = ("on", "devtools", "off", "not supported")
# NVML's own buffers bound what an honest driver returns.
NAME_CHARS = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE
UUID_CHARS = 96  # NVML_DEVICE_UUID_V2_BUFFER_SIZE
SERIAL_CHARS = 30  # NVML_DEVICE_SERIAL_BUFFER_SIZE
DRIVER_CHARS = 80  # NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
MAX_REPORT_BYTES = 0x2000  # NVML_CC_GPU_ATTESTATION_REPORT_SIZE
MAX_CERT_CHAIN_BYTES = 0x1400  # NVML_GPU_ATTESTATION_CERT_CHAIN_SIZE
# Encoded sizes, for the answers message's limit: printable ASCII escapes to at most 2 characters
# in JSON; evidence travels as 0x-hex.
IDENTITY_JSON_BYTES = 256 + 2 * (NAME_CHARS + UUID_CHARS + SERIAL_CHARS + DRIVER_CHARS)
EVIDENCE_JSON_BYTES = 64 + (2 + 2 * MAX_REPORT_BYTES) + (2 + 2 * MAX_CERT_CHAIN_BYTES)

_IDENTITY_KEYS = {"version", "name", "uuid", "memory_bytes", "serial", "driver_version", "cc_mode"}
_EVIDENCE_KEYS = {"report", "cert_chain"}


class MalformedIdentity(ProtocolError):
    """A device identity or its evidence is not the shape PROTOCOL.md describes."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"malformed device identity: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class DeviceIdentity:
    """NVML's word on one GPU: a claim, recorded with the round, never proof of the model."""

    name: str
    uuid: str  # NVML's, with its `GPU-` prefix: keccak256 of it is the device's registered uuidHash
    memory_bytes: int
    serial: str | None  # None where the board reports none (GeForce)
    driver_version: str
    cc_mode: str  # one of CC_MODES


@dataclass(frozen=True)
class AttestationEvidence:
    """The GPU's SPDM measurement report (it holds the requested nonce and is signed by the GPU's
    attestation key) and the PEM certificate chain of that key, as NVML returns them."""

    report: bytes
    cert_chain: bytes


def identity_to_json(identity: DeviceIdentity) -> dict[str, Any]:
    return {"version": IDENTITY_VERSION, "name": identity.name, "uuid": identity.uuid,
            "memory_bytes": identity.memory_bytes, "serial": identity.serial,
            "driver_version": identity.driver_version, "cc_mode": identity.cc_mode}


def evidence_to_json(evidence: AttestationEvidence) -> dict[str, Any]:
    return {"report": "0x" + evidence.report.hex(), "cert_chain": "0x" + evidence.cert_chain.hex()}


def _text(obj: dict[str, Any], key: str, limit: int, optional: bool = False) -> Any:
    value = obj[key]
    if value is None and optional:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= limit:
        raise MalformedIdentity(f"{key!r} is not a string of 1 to {limit} characters")
    if not (value.isascii() and value.isprintable()):
        raise MalformedIdentity(f"{key!r} is not printable ASCII")
    return value


def _keys(obj: Any, expected: set[str], what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise MalformedIdentity(f"{what} is not an object")
    if set(obj) != expected:
        raise MalformedIdentity(f"{what} keys are {sorted(obj)}, expected {sorted(expected)}")
    return obj


def identity_from_json(obj: Any) -> DeviceIdentity:
    if isinstance(obj, dict) and obj.get("version") != IDENTITY_VERSION:
        raise MalformedIdentity(f"version {obj.get('version')!r} is not {IDENTITY_VERSION}")
    obj = _keys(obj, _IDENTITY_KEYS, "identity")
    memory = obj["memory_bytes"]
    if not isinstance(memory, int) or isinstance(memory, bool) or not 0 <= memory < 2**64:
        raise MalformedIdentity("'memory_bytes' is not a uint64")
    if obj["cc_mode"] not in CC_MODES:
        raise MalformedIdentity(f"'cc_mode' is not one of {', '.join(CC_MODES)}")
    return DeviceIdentity(_text(obj, "name", NAME_CHARS), _text(obj, "uuid", UUID_CHARS), memory,
                          _text(obj, "serial", SERIAL_CHARS, optional=True),
                          _text(obj, "driver_version", DRIVER_CHARS), obj["cc_mode"])


def _blob(obj: dict[str, Any], key: str, limit: int) -> bytes:
    text = obj[key]
    if not isinstance(text, str) or not text.startswith("0x") or not 2 < len(text) <= 2 + 2 * limit:
        raise MalformedIdentity(f"evidence {key!r} is not 0x and 1 to {limit} hex bytes")
    try:
        return bytes.fromhex(text[2:])
    except ValueError as err:
        raise MalformedIdentity(f"evidence {key!r} is not hex") from err


def evidence_from_json(obj: Any) -> AttestationEvidence:
    obj = _keys(obj, _EVIDENCE_KEYS, "evidence")
    return AttestationEvidence(_blob(obj, "report", MAX_REPORT_BYTES),
                               _blob(obj, "cert_chain", MAX_CERT_CHAIN_BYTES))
