"""Device identity and CC attestation in PoG rounds, as the verifier records them.

The rounds are real (real products, roots, answers and checker) on simulated devices whose
rates stand in for GPUs through the verifier's clock, as in test_pog_checker. The attestation
evidence is NVIDIA's own: the Hopper report and certificate chain that nv-local-gpu-verifier
ships as samples, checked by that package (the tests that need it skip where it is absent: set
UNCHAINED_VERIFIER_NV_PYTHON, or run scripts/setup.sh, which builds .venv-nv).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from eth_utils import keccak

from protocol.pog.identity import AttestationEvidence, DeviceIdentity
from protocol.pog.messages import encode_answers, encode_commitment, encode_fills, encode_probes
from protocol.pog.residency import FillParams
from provider_agent.gpus import Device
from provider_agent.pog_prover import PogProver
from provider_agent.pog_residency import ResidencyProver
from verifier.cc_attestation import SDK_MISSING, NvAttester
from verifier.pog_checker import PogChecker

K = 32
H100 = "NVIDIA H100 80GB HBM3"
RATE = 0.85 * 1978.9  # two H100s side by side are named at this int8 rate (test_pog_checker)
REPO = Path(__file__).resolve().parents[2]


def isolated(python: str, code: str) -> subprocess.CompletedProcess[str]:
    """`python -I -c code` in a scratch directory (the SDK writes verifier.log where it runs)."""
    with tempfile.TemporaryDirectory() as scratch:
        return subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, cwd=scratch)


def has_sdk(python: str) -> bool:
    return isolated(python, "import verifier.cc_admin_utils").returncode == 0


def nv_python() -> str | None:
    """An interpreter with nv-local-gpu-verifier, or None."""
    for python in (os.environ.get("UNCHAINED_VERIFIER_NV_PYTHON"), str(REPO / ".venv-nv/bin/python")):
        if python and Path(python).exists() and has_sdk(python):
            return python
    return None


NV_PYTHON = nv_python()
needs_sdk = pytest.mark.skipif(NV_PYTHON is None, reason="nv-local-gpu-verifier is not installed")


def sdk_samples() -> tuple[bytes, bytes]:
    """The SDK's sample Hopper attestation report and its certificate chain."""
    assert NV_PYTHON is not None
    code = ("import json, verifier.config as c; s = c.HopperSettings; "
            "print(json.dumps([s.ATTESTATION_REPORT_PATH, s.GPU_ATTESTATION_CERTIFICATES_PATH]))")
    report, chain = json.loads(isolated(NV_PYTHON, code).stdout.splitlines()[-1])
    return bytes.fromhex(Path(report).read_text().strip()), Path(chain).read_bytes()


def identity(uuid: str, name: str = H100, cc_mode: str = "off", driver: str = "550.90.07") -> DeviceIdentity:
    return DeviceIdentity(name, uuid, 80 << 30, "1652823054567", driver, cc_mode)


class EvidenceProver(PogProver):
    """The real prover, answering with given evidence (the SDK's sample) for every device."""

    def __init__(self, devices, evidence: AttestationEvidence) -> None:
        super().__init__(devices)
        self.sample = evidence

    def _evidence(self, device):
        return self.sample


FILL = FillParams(lanes=64, steps=64, iterations=1)  # 4,096 blocks: a small fill for CPU tests


def timed_round(prover: PogProver, seed: bytes, attester: NvAttester | None = None, rate: float = RATE,
                fill: FillParams | None = None):
    """A real int8 round of H100 claims whose verifier clock runs at `rate` TOPS per device; with
    `fill`, every device's residency fill of that shape is built and probed in time."""
    now = [0.0]
    checker = PogChecker(k=K, dtype="int8", answer_window_s=10.0, clock=lambda: now[0], attester=attester)
    checker.open_round(seed, [checker.claim(d.uuid_hash, H100, 128, fill=fill) for d in prover.devices])
    commitment = prover.commit_round(seed, 128)
    now[0] += 2.0 * 128**3 / (rate * 1e12)
    checker.receive_commitment(encode_commitment(commitment))
    if fill is not None:
        residency = ResidencyProver(prover.devices)
        checker.receive_fills(encode_fills(residency.commit_fills(seed, fill)))
        checker.probe(keccak(b"probe"))
        checker.judge_probes(encode_probes(residency.answer_probes(keccak(b"probe"))))
    randomness = keccak(b"randomness")
    checker.reveal(randomness)
    return checker.judge(encode_answers(prover.answer_round(randomness, K)))


def h100s(identities):
    return [Device("cpu", H100, f"GPU-h100-{i}", 0, ident(f"GPU-h100-{i}") if ident else None)
            for i, ident in enumerate(identities)]


def test_identity_is_recorded_and_a_consistent_claim_is_named():
    # One device: more than one is counted by residency fills (test_pog_residency_round.py).
    verdict = timed_round(PogProver(h100s([identity])), keccak(b"seed"))
    assert verdict.passed
    [g] = verdict.gpus
    assert g.gpu_class == "H100 SXM" and g.unidentified is None
    assert g.identity == identity("GPU-h100-0")
    assert g.attestation == "not supported"  # CC off


def test_a_claim_nvml_contradicts_is_never_named_by_it():
    # Before: the class came from the claimed name alone, whatever NVML said.
    rtx = lambda uuid: identity(uuid, name="NVIDIA GeForce RTX 4090")  # noqa: E731
    verdict = timed_round(PogProver(h100s([rtx])), keccak(b"seed"))
    assert verdict.passed  # the work is right: only the naming is withheld
    assert verdict.gpus[0].gpu_class is None
    assert verdict.gpus[0].unidentified == (
        f"NVML names the device 'NVIDIA GeForce RTX 4090', the provider claims '{H100}'")
    assert timed_round(PogProver(h100s([identity])), keccak(b"seed")).gpus[0].gpu_class == "H100 SXM"


def test_an_nvml_uuid_other_than_the_registered_device_is_not_named():
    other = lambda uuid: identity("GPU-somewhere-else")  # noqa: E731
    verdict = timed_round(PogProver(h100s([other, identity])), keccak(b"seed"))
    assert verdict.gpus[0].gpu_class is None
    assert verdict.gpus[0].unidentified == "NVML reports UUID GPU-somewhere-else, not the registered device"


def test_no_identity_is_recorded_as_not_reported():
    verdict = timed_round(PogProver(h100s([None, None])), keccak(b"seed"))
    assert [(g.identity, g.attestation) for g in verdict.gpus] == [(None, "not reported")] * 2


def test_cc_mode_without_evidence_is_recorded_failed():
    on = lambda uuid: identity(uuid, cc_mode="on")  # noqa: E731
    verdict = timed_round(PogProver(h100s([on, on])), keccak(b"seed"))
    assert verdict.gpus[0].attestation == "failed: the GPU reports CC mode but sent no attestation evidence"


def test_evidence_without_the_sdk_is_recorded_not_checked():
    if has_sdk(sys.executable):
        pytest.skip("this interpreter has nv-local-gpu-verifier")
    evidence = AttestationEvidence(b"\x11" * 64, b"-----BEGIN CERTIFICATE-----\n")
    on = lambda uuid: identity(uuid, cc_mode="on")  # noqa: E731
    verdict = timed_round(EvidenceProver(h100s([on]), evidence), keccak(b"seed"), NvAttester(sys.executable))
    assert verdict.gpus[0].attestation == SDK_MISSING
    assert verdict.passed


@needs_sdk
def test_the_sdks_sample_evidence_attests_the_round_whose_seed_it_answers():
    report, chain = sdk_samples()
    seed = report[4:36]  # the sample's nonce, in its SPDM GET_MEASUREMENTS request
    on = lambda uuid: identity(uuid, cc_mode="on")  # noqa: E731
    verdict = timed_round(EvidenceProver(h100s([on]), AttestationEvidence(report, chain)), seed,
                          NvAttester(NV_PYTHON), rate=1978.9)
    assert verdict.gpus[0].attestation == "attested: GH100 board 1010-0200-882"


@needs_sdk
def test_an_attested_single_hopper_gpu_is_named_where_timing_cannot():
    # One H100 measured like the H200 was (969 TOPS of int8 through torch, docs/BENCHMARKS.md) is
    # below a two-socket AMX server's 1048.6: by time alone it is never named. Its CC report,
    # signed for this round's seed, names it; the same round without the report does not.
    report, chain = sdk_samples()
    seed = report[4:36]
    on = lambda uuid: identity(uuid, cc_mode="on")  # noqa: E731
    attested = timed_round(EvidenceProver(h100s([on]), AttestationEvidence(report, chain)), seed,
                           NvAttester(NV_PYTHON), rate=969.0, fill=FILL)
    assert attested.gpus[0].gpu_class == "H100 SXM" and attested.gpus[0].unidentified is None
    bare = timed_round(PogProver(h100s([identity])), seed, NvAttester(NV_PYTHON), rate=969.0, fill=FILL)
    assert bare.gpus[0].gpu_class is None and "CPU server" in bare.gpus[0].unidentified
    # evidence for another round's seed names nothing
    replayed = timed_round(EvidenceProver(h100s([on]), AttestationEvidence(report, chain)), keccak(b"other"),
                           NvAttester(NV_PYTHON), rate=969.0, fill=FILL)
    assert replayed.gpus[0].gpu_class is None
    # attested but without its fill in the round (an H100's chip posing as an H200 holds no
    # H200 fill): the attestation alone names nothing
    unprobed = timed_round(EvidenceProver(h100s([on]), AttestationEvidence(report, chain)), seed,
                           NvAttester(NV_PYTHON), rate=969.0)
    assert unprobed.gpus[0].gpu_class is None


@needs_sdk
@pytest.mark.parametrize("tamper,reason", [
    (lambda r, c, s: (r, c, keccak(b"another round")),
     "failed: NonceMismatchError: The nonce in the SPDM GET MEASUREMENT request message is not matching"),
    (lambda r, c, s: (r[:-10] + bytes([r[-10] ^ 1]) + r[-9:], c, s),
     "failed: SignatureVerificationError: Attestation report signature verification failed."),
    (lambda r, c, s: (r, c[:c.index(b"-----END") - 20] + b"A" + c[c.index(b"-----END") - 19:], s),
     "failed: certificate chain does not verify to NVIDIA's device root"),
    (lambda r, c, s: (r, c[c.index(b"-----BEGIN", 10):], s),
     "failed: the certificate's firmware ID (FWID) is not the report's"),
])
def test_replayed_or_tampered_sample_evidence_fails(tamper, reason):
    report, chain = sdk_samples()
    report, chain, seed = tamper(report, chain, report[4:36])
    on = lambda uuid: identity(uuid, cc_mode="on")  # noqa: E731
    verdict = timed_round(EvidenceProver(h100s([on]), AttestationEvidence(report, chain)), seed,
                          NvAttester(NV_PYTHON), rate=1978.9)
    assert verdict.gpus[0].attestation.startswith(reason)


@needs_sdk
def test_a_driver_version_other_than_the_signed_one_fails():
    report, chain = sdk_samples()
    claimed = lambda uuid: identity(uuid, cc_mode="on", driver="560.35.03")  # noqa: E731
    verdict = timed_round(EvidenceProver(h100s([claimed]), AttestationEvidence(report, chain)), report[4:36],
                          NvAttester(NV_PYTHON), rate=1978.9)
    assert verdict.gpus[0].attestation.startswith("failed: DriverVersionMismatchError")
