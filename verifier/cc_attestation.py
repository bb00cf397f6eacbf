"""What a PoG round's device identity and attestation evidence show, as one outcome per GPU:
the `attestation` column of the PoG history (docs/PROTOCOL.md, "Device identity").

Evidence is checked by NVIDIA's local GPU verifier (`nv-local-gpu-verifier`, the package
`nv-attestation-sdk` drives for local attestation) in a child interpreter (nv_attest_child.py
says why and what is checked offline). The SDK is optional: without it evidence is recorded as
not checked, and the verifier runs as before.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from protocol.pog.identity import AttestationEvidence, DeviceIdentity

ATTESTED = "attested"
NOT_SUPPORTED = "not supported"  # a GPU without CC mode, or a CPU
NOT_REPORTED = "not reported"  # no identity and no evidence (a prover without NVML)
SDK_MISSING = "not checked: SDK not installed"
CC_ACTIVE = ("on", "devtools")
OUTCOME_CHARS = 200  # the PoG history's column

_CHILD = Path(__file__).with_name("nv_attest_child.py")


def failed(reason: str) -> str:
    return f"failed: {reason}"[:OUTCOME_CHARS]


@dataclass(frozen=True)
class NvAttester:
    """Runs nv_attest_child.py under `python`: an interpreter with nv-local-gpu-verifier installed
    (its own virtual environment: its package is named `verifier` too), by default this one."""

    python: str = sys.executable
    timeout_s: float = 60.0

    def check(self, evidence: AttestationEvidence, nonce: bytes, driver_version: str) -> str:
        request = {"report": evidence.report.hex(), "cert_chain": evidence.cert_chain.hex(),
                   "nonce": nonce.hex(), "driver_version": driver_version}
        # A scratch working directory: the SDK writes verifier.log into it at import.
        with tempfile.TemporaryDirectory(prefix="nv-attest-") as scratch:
            try:
                done = subprocess.run([self.python, "-I", str(_CHILD)], input=json.dumps(request),
                                      capture_output=True, text=True, timeout=self.timeout_s, cwd=scratch)
            except (OSError, subprocess.TimeoutExpired) as err:
                return failed(f"the SDK's interpreter did not answer: {err}")
        try:
            result = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            return failed(f"the SDK's interpreter exited {done.returncode}: {done.stderr.strip()[-120:]}")
        if result["outcome"] == "sdk missing":
            return SDK_MISSING
        if result["outcome"] == ATTESTED:
            return f"{ATTESTED}: {result['chip']} board {result['board']}"[:OUTCOME_CHARS]
        return failed(result["reason"])


def attestation_outcome(identity: DeviceIdentity | None, evidence: AttestationEvidence | None,
                        round_seed: bytes, attester: NvAttester) -> str:
    """One GPU's outcome: attested (the evidence verifies for this round's seed), failed with the
    reason, not supported / not reported, or not checked without the SDK."""
    if evidence is None:
        if identity is None:
            return NOT_REPORTED
        if identity.cc_mode in CC_ACTIVE:
            return failed("the GPU reports CC mode but sent no attestation evidence")
        return NOT_SUPPORTED
    if identity is None:
        return failed("evidence sent without the device's identity")
    return attester.check(evidence, round_seed, identity.driver_version)
