"""Checks one GPU's attestation evidence with NVIDIA's local GPU verifier, offline. Run by
`verifier.cc_attestation` as `python -I nv_attest_child.py`: JSON request on stdin
({report, cert_chain, nonce, driver_version}, hex and text), one JSON line on stdout
({outcome: attested|failed|sdk missing, ...}).

A child interpreter because nv-local-gpu-verifier installs a top-level package named `verifier`,
this project's service name too: the two cannot share one interpreter (with `-I` neither this
file's folder nor PYTHONPATH is on sys.path, so `verifier` here is NVIDIA's). It also keeps the
SDK's pinned dependencies, its class-level state and its log file (verifier.log in the working
directory) out of the verifier service.

What runs offline (the SDK's own functions): the report parses; the FWID in the leaf certificate
equals the report's; the certificate chain verifies up to NVIDIA's device root shipped in the
SDK (the prover's copy of the root is dropped); the report's nonce is the round's seed; its
driver version is the one NVML reported; its signature verifies under the leaf key. Not run:
OCSP revocation of the chain and the RIM (golden measurement) comparison, which need NVIDIA's
services over the network.
"""

import json
import sys


def _text(value: bytes) -> str:
    return value.rstrip(b"\0").decode("ascii", "replace").strip()


def check(request: dict) -> dict:
    from OpenSSL import crypto
    from verifier.attestation import AttestationReport
    from verifier.cc_admin_utils import CcAdminUtils
    from verifier.config import BaseSettings, BlackwellSettings, HopperSettings
    from verifier.nvml.gpu_cert_chains import GpuCertificateChains
    from verifier.utils import format_vbios_version

    chain = GpuCertificateChains.extract_cert_chain(bytes.fromhex(request["cert_chain"]))[:-1]
    with open(BaseSettings.DEVICE_ROOT_CERT) as f:
        chain.append(crypto.load_certificate(crypto.FILETYPE_PEM, f.read()))
    if len(chain) < 2:
        return {"outcome": "failed", "reason": "certificate chain has no device certificate"}
    model = chain[0].get_subject().CN or ""  # the attestation key's: "GH100 A01 GSP FMC LF"
    chip = model.split()[0] if model else ""
    settings = HopperSettings() if chip.startswith("GH") else BlackwellSettings() if chip.startswith("GB") else None
    if settings is None:
        return {"outcome": "failed", "reason": f"no attestation support for {model!r}"}
    report = AttestationReport(bytes.fromhex(request["report"]), settings)
    opaque = report.get_response_message().get_opaque_data()
    verified = CcAdminUtils.verify_gpu_certificate_chain(chain, settings, opaque.get_data("OPAQUE_FIELD_ID_FWID").hex())
    if verified is False:  # the SDK returns a bare False here, a tuple otherwise
        return {"outcome": "failed", "reason": "the certificate's firmware ID (FWID) is not the report's"}
    valid, expired, _ = verified
    if not valid:
        return {"outcome": "failed", "reason": "certificate chain " + ("expired" if expired else
                                                                      "does not verify to NVIDIA's device root")}
    vbios = format_vbios_version(opaque.get_data("OPAQUE_FIELD_ID_VBIOS_VERSION")).lower()
    # Raises on a nonce, driver version or signature that does not match (the SDK's errors).
    CcAdminUtils.verify_attestation_report(report, chain[0], bytes.fromhex(request["nonce"]),
                                           request["driver_version"], vbios, settings)
    board = "-".join(_text(opaque.get_data(f)) for f in
                     ("OPAQUE_FIELD_ID_PROJECT", "OPAQUE_FIELD_ID_PROJECT_SKU", "OPAQUE_FIELD_ID_CHIP_SKU"))
    return {"outcome": "attested", "chip": chip, "board": board, "vbios": vbios}


def main() -> None:
    out, sys.stdout = sys.stdout, sys.stderr  # the SDK logs to stdout: keep it off the answer
    request = json.load(sys.stdin)
    try:
        import verifier.cc_admin_utils  # noqa: F401  NVIDIA's package, not this project's
    except ImportError as err:
        result = {"outcome": "sdk missing", "reason": str(err)}
    else:
        try:
            result = check(request)
        except Exception as err:  # the SDK raises its own error classes, or asserts
            reason = " ".join(str(err).split()) or type(err).__name__
            result = {"outcome": "failed", "reason": f"{type(err).__name__}: {reason}"}
    print(json.dumps(result), file=out)


if __name__ == "__main__":
    main()
