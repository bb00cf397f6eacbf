"""NVML identity on a machine without an NVIDIA driver: what this CPU-only machine can show
truthfully. With nvidia-ml-py absent the reason says to install it; with it present the driver
library is missing. Nothing here pretends a GPU exists."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from provider_agent.identity import NONCE_BYTES, NvmlUnavailable, Nvml, device_identity_report, nvml_identities

HAS_PYNVML = importlib.util.find_spec("pynvml") is not None


def test_report_without_a_driver_names_the_reason_and_lists_no_device() -> None:
    nonce = bytes(range(NONCE_BYTES))
    report = device_identity_report(nonce)
    assert report["devices"] == []
    assert report["nonce"] == "0x" + nonce.hex()
    expected = "NVML did not initialise" if HAS_PYNVML else "nvidia-ml-py is not installed"
    assert report["nvml"].startswith(expected)
    json.dumps(report)  # the benchmark writes it as JSON


def test_nvml_session_refuses_with_a_reason_and_lookups_come_back_empty() -> None:
    with pytest.raises(NvmlUnavailable):
        with Nvml():
            pass
    assert nvml_identities() == {}


def test_report_refuses_a_nonce_that_is_not_32_bytes() -> None:
    with pytest.raises(ValueError, match="nonce must be 32 bytes, got 31"):
        device_identity_report(b"\0" * 31)


def test_identity_module_loads_with_the_standard_library_alone() -> None:
    # The GPU benchmark machine holds torch and nvidia-ml-py, not this project's dependencies.
    heavy = ["torch", "numpy", "sha3", "web3", "eth_account", "pydantic", "protocol", "client"]
    code = ("import sys, provider_agent.identity; "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cc_mode_names_are_the_protocols() -> None:
    from protocol.pog.identity import CC_MODES as WIRE
    from provider_agent.identity import CC_MODES
    assert CC_MODES == WIRE


def test_a_cpu_round_reports_no_identity_and_no_evidence() -> None:
    from provider_agent.gpus import cpu_device
    from provider_agent.pog_prover import PogProver
    prover = PogProver([cpu_device()])
    prover.commit_round(bytes([7]) * 32, 64)
    gpu = prover.answer_round(bytes([9]) * 32, 32).gpus[0]
    assert (gpu.identity, gpu.evidence) == (None, None)


def test_a_device_claiming_cc_mode_without_evidence_answers_without_it(caplog) -> None:
    # What a device whose NVML says "CC on" sends when the attestation call fails (here: no NVML
    # at all): its identity, no evidence, and a warning; the verifier records "failed".
    from protocol.pog.identity import DeviceIdentity
    from provider_agent.gpus import Device
    from provider_agent.pog_prover import PogProver
    identity = DeviceIdentity("NVIDIA H200", "GPU-0", 1 << 30, None, "550.90.07", "on")
    prover = PogProver([Device("cpu", "cpu claimed", "GPU-0", 1 << 30, identity)])
    prover.commit_round(bytes([7]) * 32, 64)
    gpu = prover.answer_round(bytes([9]) * 32, 32).gpus[0]
    assert (gpu.identity, gpu.evidence) == (identity, None)
    assert "GPU-0 is in CC mode but gave no attestation evidence" in caplog.text


@pytest.mark.skipif(not HAS_PYNVML, reason="needs nvidia-ml-py")
def test_cuda_devices_carry_nvml_identity_where_a_driver_answers() -> None:
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from provider_agent.gpus import cuda_devices
    report = {d["uuid"]: d for d in device_identity_report()["devices"]}
    for device in cuda_devices():
        assert device.identity is not None and device.identity.uuid == device.uuid
        assert device.identity.name == report[device.uuid]["name"] == device.name


def test_the_report_runs_as_a_module_and_prints_json() -> None:
    out = subprocess.run([sys.executable, "-m", "provider_agent.identity"], capture_output=True, text=True, check=True)
    printed, direct = json.loads(out.stdout), device_identity_report()
    assert printed["nvml"] == direct["nvml"]
    assert [d["uuid"] for d in printed["devices"]] == [d["uuid"] for d in direct["devices"]]
