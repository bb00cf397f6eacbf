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
