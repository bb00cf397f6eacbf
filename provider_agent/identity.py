"""What the NVIDIA driver says a GPU is (NVML, through `nvidia-ml-py`), and the confidential-computing
evidence it can produce for a nonce.

NVML's name, UUID, memory and serial are the driver's word, reported as claims (PROTOCOL.md,
"Device identity"): a patched driver or a proxy can say anything. Where the GPU runs in
confidential-computing mode (H100/H200/Blackwell under a CVM), its attestation report is signed by a
key certified up to NVIDIA's device root and carries the nonce it was asked for: with the round's
seed as the nonce, the report binds that GPU to that round.

This module imports only the standard library and, when installed, `pynvml`: the GPU benchmark
calls `device_identity_report()` on a machine holding torch and nvidia-ml-py alone.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

from provider_agent import ProviderAgentError

logger = logging.getLogger(__name__)

NONCE_BYTES = 32  # SPDM's nonce; a PoG round seed is bytes32

# protocol.pog.identity.CC_MODES, spelled again here: this module imports nothing of the project's
# dependencies (tests/provider_agent/test_identity.py checks both agree).
CC_ON = "on"
CC_DEVTOOLS = "devtools"  # CC on with developer tools enabled: the GPU's memory is readable, reports say so
CC_OFF = "off"
CC_UNSUPPORTED = "not supported"  # the driver or the GPU has no confidential computing
CC_MODES = (CC_ON, CC_DEVTOOLS, CC_OFF, CC_UNSUPPORTED)


class NvmlUnavailable(ProviderAgentError):
    """NVML cannot be read: nvidia-ml-py is not installed, or the driver library is absent."""


class EvidenceUnavailable(ProviderAgentError):
    """The GPU produced no attestation evidence (not in CC mode, not supported, or the call failed)."""


@dataclass(frozen=True)
class NvmlIdentity:
    """One GPU as NVML describes it."""

    index: int
    name: str
    uuid: str  # with NVML's `GPU-` prefix
    memory_bytes: int
    serial: str | None  # None where the board has none to report (GeForce: NVML_ERROR_NOT_SUPPORTED)
    driver_version: str
    cc_mode: str  # one of CC_MODES; the driver's system-wide state


@dataclass(frozen=True)
class Evidence:
    """What NVIDIA's verifier checks: the SPDM measurement report (signed, carrying the nonce) and
    the PEM certificate chain of the key that signed it, as NVML returns them."""

    report: bytes
    cert_chain: bytes


def _pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError as err:
        raise NvmlUnavailable("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from err
    return pynvml


def _text(value: str | bytes) -> str:
    # nvidia-ml-py returns str since 11.515; older releases returned bytes.
    return value.decode() if isinstance(value, bytes) else value


def _is_unsupported(nvml: ModuleType, err: Exception) -> bool:
    code = getattr(err, "value", None)
    return code in (nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_FUNCTION_NOT_FOUND)


def _cc_mode(nvml: ModuleType) -> str:
    if not hasattr(nvml, "nvmlSystemGetConfComputeState"):
        return CC_UNSUPPORTED  # nvidia-ml-py older than 12.535
    try:
        state = nvml.nvmlSystemGetConfComputeState()
    except nvml.NVMLError as err:  # an identity without CC beats none at all
        if not _is_unsupported(nvml, err):
            logger.warning("NVML's confidential-computing state unreadable, taken as not supported: %s", err)
        return CC_UNSUPPORTED
    if not state.ccFeature:
        return CC_OFF
    return CC_DEVTOOLS if state.devToolsMode else CC_ON


def _serial(nvml: ModuleType, handle: Any) -> str | None:
    try:
        return _text(nvml.nvmlDeviceGetSerial(handle)) or None
    except nvml.NVMLError as err:
        if not _is_unsupported(nvml, err):
            logger.warning("NVML's serial number unreadable, reported as none: %s", err)
        return None


class Nvml:
    """An initialised NVML session: `with Nvml() as nvml: nvml.identities()`."""

    def __init__(self) -> None:
        self._nvml = _pynvml()

    def __enter__(self) -> Nvml:
        try:
            self._nvml.nvmlInit()
        except self._nvml.NVMLError as err:
            raise NvmlUnavailable(f"NVML did not initialise: {err}") from err
        return self

    def __exit__(self, *exc: object) -> None:
        self._nvml.nvmlShutdown()

    def identities(self) -> list[NvmlIdentity]:
        """Every GPU NVML sees, in NVML's order."""
        nvml = self._nvml
        try:
            driver = _text(nvml.nvmlSystemGetDriverVersion())
            cc = _cc_mode(nvml)
            found = []
            for i in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
                found.append(NvmlIdentity(
                    index=i,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    memory_bytes=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
                    serial=_serial(nvml, handle),
                    driver_version=driver,
                    cc_mode=cc,
                ))
        except nvml.NVMLError as err:
            raise NvmlUnavailable(f"NVML query failed: {err}") from err
        return found

    def evidence(self, uuid: str, nonce: bytes) -> Evidence:
        """The attestation report for `nonce` of the GPU with NVML UUID `uuid` (`GPU-...`) and its
        certificate chain, as the nv-local-gpu-verifier collects them."""
        if len(nonce) != NONCE_BYTES:
            raise ValueError(f"nonce must be {NONCE_BYTES} bytes, got {len(nonce)}")
        nvml = self._nvml
        if not hasattr(nvml, "nvmlDeviceGetConfComputeGpuAttestationReport"):
            raise EvidenceUnavailable("nvidia-ml-py has no attestation calls (needs 12.535 or later)")
        try:
            handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
            report = nvml.nvmlDeviceGetConfComputeGpuAttestationReport(handle, nonce)
            cert = nvml.nvmlDeviceGetConfComputeGpuCertificate(handle)
        except nvml.NVMLError as err:
            raise EvidenceUnavailable(f"{uuid}: {err}") from err
        return Evidence(bytes(report.attestationReport[:report.attestationReportSize]),
                        bytes(cert.attestationCertChain[:cert.attestationCertChainSize]))


def nvml_identities() -> dict[str, NvmlIdentity]:
    """UUID (with `GPU-`) -> NVML's identity; {} where NVML cannot be read (no package, no driver)."""
    try:
        with Nvml() as nvml:
            return {ident.uuid: ident for ident in nvml.identities()}
    except NvmlUnavailable:
        return {}


def collect_evidence(uuid: str, nonce: bytes) -> Evidence:
    """One GPU's attestation evidence for `nonce` (EvidenceUnavailable says why there is none)."""
    try:
        with Nvml() as nvml:
            return nvml.evidence(uuid, nonce)
    except NvmlUnavailable as err:
        raise EvidenceUnavailable(str(err)) from err


def device_identity_report(nonce: bytes | None = None) -> dict[str, Any]:
    """What NVML says of every GPU here and whether each produced attestation evidence for `nonce`
    (random when not given). JSON-ready: evidence is hex, so a real report can be kept as a test
    fixture. Never raises for a missing package or driver: the reason is in `nvml`."""
    nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
    if len(nonce) != NONCE_BYTES:
        raise ValueError(f"nonce must be {NONCE_BYTES} bytes, got {len(nonce)}")
    result: dict[str, Any] = {"nvml": "ok", "nonce": "0x" + nonce.hex(), "devices": []}
    try:
        with Nvml() as nvml:
            for ident in nvml.identities():
                entry: dict[str, Any] = asdict(ident)
                try:
                    evidence = nvml.evidence(ident.uuid, nonce)
                except EvidenceUnavailable as err:
                    entry.update(evidence_collected=False, evidence_error=str(err))
                else:
                    entry.update(evidence_collected=True, evidence_error=None,
                                 evidence_report="0x" + evidence.report.hex(),
                                 evidence_cert_chain=evidence.cert_chain.decode("ascii", "replace"))
                result["devices"].append(entry)
    except NvmlUnavailable as err:
        result["nvml"] = str(err)
    return result


if __name__ == "__main__":  # `python -m provider_agent.identity`: the report as JSON, on a bare GPU machine too
    import json

    print(json.dumps(device_identity_report(), indent=2))
