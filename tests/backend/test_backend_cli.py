"""The renter CLI against a live backend (uvicorn, indexer thread) and anvil: push a model,
submit and fund a job from a keystore, the provider commits and uploads, the renter downloads
and verifies every item; leases start and stop."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import backend_support as support
import httpx
import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from renter.cli import job_app, lease_app, model_app
from renter.client import BackendClient
from renter.errors import RenterError
from client.escrow_jobs import read_job_view
from protocol.jobs import encode_output
from tests.support.served import lying
from unchained_cli.errors import GuardedGroup

root = typer.Typer(cls=GuardedGroup)  # errors end as `unchained` shows them: one line
root.add_typer(job_app, name="job")
root.add_typer(model_app, name="model")
root.add_typer(lease_app, name="lease")
runner = CliRunner()


def _invoke(*args: str) -> str:
    result = runner.invoke(root, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _wait_for(url: str, path: str, predicate, timeout: float = 15.0) -> dict:  # type: ignore[no-untyped-def, type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = httpx.get(url + path)
        if response.status_code == 200 and predicate(response.json()):
            return response.json()
        time.sleep(0.1)
    raise AssertionError(f"{path} did not reach the expected state")


def test_submit_fund_commit_and_verified_result(server, chain, session, market, keystore, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, _, deployment = chain
    model_file = tmp_path / "net.pt"
    model_file.write_bytes(support.Tagged.torchscript(21.0))
    pushed = _invoke("model", "push", str(model_file), "--keystore", str(keystore), "--backend", server, "--private")
    model_hash = re.search(r"model (0x[0-9a-f]{64})", pushed).group(1)
    listed = _invoke("model", "list", "--keystore", str(keystore), "--backend", server)
    assert model_hash[:10] in listed

    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for i in range(4):
        (inputs / f"{i:03d}.bin").write_bytes(encode_output(np.full(8, i, np.float32)))
    # Private model: only private-capable providers qualify.
    provider = BackendClient.connect(server, support.anvil_key(1))
    provider.http.put(f"/providers/{market.provider}/profile", json={"private_ok": True},
                      headers=provider._auth()).raise_for_status()
    out = _invoke("job", "submit", "--model", str(model_file), "--inputs", str(inputs), "--max-price", "0.01",
                  "--keystore", str(keystore), "--backend", server, "--rpc", chain[0].rpc_url,
                  "--deployment", str(deployment), "--private", "--format", "torchscript",
                  "--gpu-class", "H100-SXM", "--gpu-class", "A100")
    job_id = int(re.search(r"job (\d+) funded", out).group(1))
    job = _wait_for(server, f"/jobs/{job_id}", lambda j: True)
    assert job["provider"] == market.provider.lower() and job["renter"] == market.renter.lower()
    assert job["spec"]["model"] == model_hash and len(job["spec"]["inputs"]) == 4
    assert int(job["price"]) == 4 * 10**12  # the quote: 4 items at the provider's job-unit price

    outputs = [b"result-%d" % i for i in range(4)]
    tree = support.commit_outputs(session, market.provider, job_id, outputs)
    _wait_for(server, f"/jobs/{job_id}", lambda j: j["status"] == "committed")
    for i, data in enumerate(outputs):
        provider.upload_output(job_id, i, data, tree.proof(i))

    status = _invoke("job", "status", str(job_id), "--backend", server, "--rpc", chain[0].rpc_url,
                     "--deployment", str(deployment))
    assert "committed" in status and "the backend shows" not in status
    result_dir = tmp_path / "results"
    verified = _invoke("job", "result", str(job_id), "--keystore", str(keystore), "--out", str(result_dir),
                       "--backend", server, "--rpc", chain[0].rpc_url, "--deployment", str(chain[2]))
    assert "4 items verified" in verified
    assert [p.read_bytes() for p in sorted(result_dir.iterdir())] == outputs

    # The renter may challenge its own job inside the window: the escrow freezes, and a second
    # challenge of the same job is refused with the contract's reason.
    rpc, deployment = chain[0].rpc_url, str(chain[2])
    challenged = _invoke("job", "challenge", str(job_id), "--keystore", str(keystore), "--k", "4",
                         "--rpc", rpc, "--deployment", deployment)
    challenge_id = int(re.search(r"challenge (\d+) on job", challenged).group(1))
    manager = session.contract("ChallengeManager")
    assert manager.functions.challenge(challenge_id).call().subject == job_id
    assert read_job_view(session.contract("JobEscrow"), job_id).frozen is True  # frozen
    again = runner.invoke(root, ["job", "challenge", str(job_id), "--keystore", str(keystore), "--rpc", rpc,
                                 "--deployment", deployment])
    assert again.exit_code == 1 and f"job {job_id} is already challenged" in " ".join(again.output.split())


def _pushed(server: str, keystore: Path, tmp_path: Path, tag: float) -> str:
    model_file = tmp_path / f"net-{tag}.pt"
    model_file.write_bytes(support.Tagged.torchscript(tag))
    pushed = _invoke("model", "push", str(model_file), "--keystore", str(keystore), "--backend", server)
    return re.search(r"model (0x[0-9a-f]{64})", pushed).group(1)


def _items(tmp_path: Path, *arrays: np.ndarray, raw: bytes | None = None) -> Path:
    inputs = tmp_path / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    for i, a in enumerate(arrays):
        (inputs / f"{i:03d}.bin").write_bytes(encode_output(a))
    if raw is not None:
        (inputs / "zzz.bin").write_bytes(raw)
    return inputs


def _submit(server: str, chain, keystore: Path, model: str, inputs: Path, *extra: str):  # type: ignore[no-untyped-def]
    return runner.invoke(root, ["job", "submit", "--model", model, "--inputs", str(inputs), "--keystore",
                                str(keystore), "--backend", server, "--rpc", chain[0].rpc_url, "--deployment",
                                str(chain[2]), *extra], terminal_width=300)


def _one_line(output: str) -> str:
    return " ".join(output.split())


def test_submit_says_why_no_provider_fits(server, chain, session, market, keystore, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = _pushed(server, keystore, tmp_path, 31.0)
    inputs = _items(tmp_path, np.zeros(8, np.float32))
    jobs_before = session.contract("JobEscrow").functions.jobCount().call()
    cheap = _submit(server, chain, keystore, model, inputs, "--max-price", "0.000000000000000001")
    said = _one_line(cheap.output)
    assert cheap.exit_code == 1 and "below the cheapest fitting provider's price for 1 items: 0.000001 ETH" in said, said
    wrong_class = _submit(server, chain, keystore, model, inputs, "--max-price", "1", "--gpu-class", "RTX-4090")
    said = _one_line(wrong_class.output)
    assert wrong_class.exit_code == 1 and "no verified provider of class RTX-4090" in said, said
    named = _submit(server, chain, keystore, model, inputs, "--max-price", "1", "--provider", market.provider2)
    said = _one_line(named.output)
    assert named.exit_code == 1 and "failed its last Proof of GPU (round" in said, said
    assert session.contract("JobEscrow").functions.jobCount().call() == jobs_before  # nothing was funded


def test_submit_refuses_an_unknown_model_and_junk_inputs_before_paying(server, chain, session, keystore,  # type: ignore[no-untyped-def]
                                                                       tmp_path) -> None:
    jobs_before = session.contract("JobEscrow").functions.jobCount().call()
    inputs = _items(tmp_path, np.zeros(8, np.float32))
    unknown = _submit(server, chain, keystore, "0x" + "ab" * 32, inputs, "--max-price", "1")
    assert unknown.exit_code == 1 and "is not in the hub" in _one_line(unknown.output)
    model = _pushed(server, keystore, tmp_path, 32.0)
    junk = _items(tmp_path / "junk", np.zeros(8, np.float32), raw=b"a text file, not an array")
    refused = _submit(server, chain, keystore, model, junk, "--max-price", "1")
    assert refused.exit_code == 1 and "input item 1 (zzz.bin) is not an item file" in _one_line(refused.output)
    mixed = _items(tmp_path / "mixed", np.zeros(8, np.float32), np.zeros(5, np.float32))
    refused = _submit(server, chain, keystore, model, mixed, "--max-price", "1", "--batch-size", "2")
    assert refused.exit_code == 1 and "items of one batch must match" in _one_line(refused.output)
    assert session.contract("JobEscrow").functions.jobCount().call() == jobs_before


def test_submit_refuses_inputs_the_model_cannot_run_before_paying(server, chain, session, keystore,  # type: ignore[no-untyped-def]
                                                                  tmp_path) -> None:
    import io

    import torch

    from tests.tiny_models import Tiny

    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(Tiny()), buffer)  # Linear(8, 4)
    model_file = tmp_path / "tiny.pt"
    model_file.write_bytes(buffer.getvalue())
    jobs_before = session.contract("JobEscrow").functions.jobCount().call()
    inputs = _items(tmp_path, np.zeros(5, np.float32), np.zeros(5, np.float32))
    refused = _submit(server, chain, keystore, str(model_file), inputs, "--max-price", "1")
    said = _one_line(refused.output)
    assert refused.exit_code == 1 and "cannot run your input items 0..1 (shape [5] float32): run failed" in said, said
    assert "nothing was paid" in said
    assert session.contract("JobEscrow").functions.jobCount().call() == jobs_before


def test_lease_start_and_stop_from_a_keystore(server, chain, session, market, keystore, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """No agent of this provider runs: the lease is paid and its key bound, no connection details
    come, and once the delivery window has passed stopping it refunds everything."""
    rpc, deployment = chain[0].rpc_url, str(chain[2])
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True)
    started = runner.invoke(root, ["lease", "start", "--provider", market.provider2, "--gpus", "1", "--hours", "1",
                                   "--ssh-key", str(tmp_path / "id.pub"), "--wait", "1", "--backend", server,
                                   "--keystore", str(keystore), "--rpc", rpc, "--deployment", deployment])
    said = " ".join(started.output.split())
    assert started.exit_code == 1 and "no connection details from the provider" in said, started.output
    lease_id = int(re.search(r"lease (\d+):", said).group(1))
    session.advance(900)
    stopped = _invoke("lease", "stop", str(lease_id), "--keystore", str(keystore), "--rpc", rpc,
                      "--deployment", deployment)
    assert "provider earned 0 ETH" in " ".join(stopped.split())
    lease = _wait_for(server, f"/leases/{lease_id}", lambda row: row["status"] == "ended")
    assert int(lease["renter_refund"]) == int(lease["paid"]) and int(lease["provider_earned"]) == 0


def test_lease_start_refuses_an_image_the_backend_refuses_before_paying(  # type: ignore[no-untyped-def]
        server, chain, session, market, keystore, tmp_path) -> None:
    rpc, deployment = chain[0].rpc_url, str(chain[2])
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True)
    (tmp_path / "rootfs.tar.gz").write_bytes(b"a file that is no tar archive")
    leases_before = session.contract("LeaseManager").functions.leaseCount().call()
    started = runner.invoke(root, ["lease", "start", "--provider", market.provider2, "--gpus", "1", "--hours", "1",
                                   "--ssh-key", str(tmp_path / "id.pub"), "--image", str(tmp_path / "rootfs.tar.gz"),
                                   "--wait", "1", "--backend", server, "--keystore", str(keystore), "--rpc", rpc,
                                   "--deployment", deployment])
    said = " ".join(started.output.split())
    assert started.exit_code == 1 and "not a tar archive" in said, started.output
    assert session.contract("LeaseManager").functions.leaseCount().call() == leases_before


def test_model_list_at_80_columns_shows_every_hash_and_owner_whole(server, keystore, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model_file = tmp_path / "wide.pt"
    model_file.write_bytes(support.Tagged.torchscript(80.0))
    pushed = _invoke("model", "push", str(model_file), "--keystore", str(keystore), "--backend", server)
    model_hash = re.search(r"model (0x[0-9a-f]{64})", pushed).group(1)
    result = runner.invoke(root, ["model", "list", "--backend", server], env={"COLUMNS": "80"},
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert model_hash in result.output.split() and "…" not in result.output, result.output
    assert support.anvil_key(3).address.lower() in result.output.lower()
    assert max(len(line) for line in result.output.splitlines()) <= 80, result.output


def test_job_status_shows_eth_and_dates_with_zone_and_wei_on_request() -> None:
    from renter.cli import job_lines

    job = {"status": "committed", "renter": "0x" + "aa" * 20, "provider": "0x" + "bb" * 20,
           "price": str(15 * 10**15), "deadline": 1_800_000_000, "output_root": "0x" + "cd" * 32,
           "item_count": 3, "challenge_window_end": 1_799_996_400, "provider_amount": None, "fee": None,
           "refund": None, "dispatched_to": None, "failure": "model does not load"}
    lines = dict(job_lines(job, now=1_799_992_800))
    assert lines["price"] == "0.015 ETH" and lines["failure"] == "model does not load"
    assert lines["deadline"] == "2027-01-15T08:00:00+00:00 (in 2 h)"
    assert lines["challenge window end"] == "2027-01-15T07:00:00+00:00 (in 1 h)"
    assert lines["output root"] == "0x" + "cd" * 32
    assert dict(job_lines(job, now=0, in_wei=True))["price"] == f"{15 * 10**15} wei"


def test_job_status_shows_the_chains_status_not_the_backends(server, chain, session, market) -> None:  # type: ignore[no-untyped-def]
    """A compromised backend shows a funded job refunded (the renter would stop waiting for its
    result and look for a refund that is not there): `job status` reads the job from the chain."""
    job_id = support.funded_job(session, market.renter, market.provider, support.keccak256(b"status-lie"), 10**15)
    _wait_for(server, f"/jobs/{job_id}", lambda row: True)

    def refunded(path: str, row: Any) -> Any:
        return {**row, "status": "refunded", "refund": str(10**15)} if isinstance(row, dict) else row

    with lying(server, refunded) as evil:
        said = " ".join(_invoke("job", "status", str(job_id), "--backend", evil, "--rpc", chain[0].rpc_url,
                                "--deployment", str(chain[2])).split())
    assert "status funded" in said and "the renter was refunded" not in said, said
    assert "the backend shows job" in said and "refunded; the chain: funded" in said, said


def test_lease_status_shows_only_connection_details_the_provider_signed_and_offered(  # type: ignore[no-untyped-def]
        server, chain, session, market, tmp_path) -> None:
    """A compromised backend relays a host of its own (and that host's key fingerprint) in a
    delivered lease's row: `lease status` must not print it as the ssh line, or the renter logs in,
    and types its secrets, on the attacker's machine."""
    from protocol.lease_access import LeaseAccess, LeaseDomain, sign, typed_hash

    leases = session.contract("LeaseManager")
    cost = leases.functions.leaseCost(market.provider2, 1, 3600).call()
    session.send(leases.functions.startLease(market.provider2, 1, 3600), market.renter, value=cost)
    lease_id = leases.functions.leaseCount().call()
    _wait_for(server, f"/leases/{lease_id}", lambda row: True)
    domain = LeaseDomain(session.web3.eth.chain_id, leases.address)
    access = LeaseAccess(lease_id, "127.0.0.1", 2222, "lease", "SHA256:" + "A" * 43)
    signature = "0x" + sign(domain, access, support.anvil_key(2).key).hex()
    assert httpx.put(f"{server}/leases/{lease_id}/access", json={**{k: v for k, v in access.message().items()
                                                                     if k != "leaseId"},
                                                                  "signature": signature}).status_code == 204
    session.send(leases.functions.offerAccess(lease_id, typed_hash(domain, access)), market.provider2)

    def evil_access(path: str, row: Any) -> Any:
        if not isinstance(row, dict):
            return row
        return {**row, "access": {**row["access"], "host": "evil.example", "hostKeyFingerprint": "SHA256:" + "B" * 43}}

    with lying(server, evil_access) as evil:
        def status(backend: str) -> str:
            return " ".join(_invoke("lease", "status", str(lease_id), "--backend", backend, "--rpc",
                                    chain[0].rpc_url, "--deployment", str(chain[2])).split())

        assert "ssh -p 2222 lease@127.0.0.1" in status(server)  # the genuine offer
        said = status(evil)
        assert "evil.example" not in said and "ssh -p" not in said, said
        assert "the provider did not sign" in said, said


def test_submit_pays_the_providers_onchain_price_not_the_backends_quote(  # type: ignore[no-untyped-def]
        server, chain, session, market, keystore, tmp_path) -> None:
    """A compromised backend quotes its favoured provider at a price of its own: within the
    renter's maximum (a hundred times the provider's) or past it. The renter pays the provider's
    on-chain price per item times the items, and nothing above its maximum."""
    from renter.orders import submit_job
    from renter.wallet import Wallet

    class Lying(BackendClient):
        def __init__(self, factor: int) -> None:
            super().__init__(BackendClient.client(server, 60), support.anvil_key(3))
            self.factor = factor

        def quotes(self, **request):  # type: ignore[no-untyped-def]
            # Every provider, whatever the renter's maximum, at the backend's own price.
            quoted = super().quotes(**{**request, "max_price_wei": str(10**20)})
            return [{**q, "price_wei": str(int(q["price_wei"]) * self.factor)} for q in quoted]

    model = _pushed(server, keystore, tmp_path, 34.0)
    inputs = [encode_output(np.full(8, i, np.float32)) for i in range(4)]
    wallet = Wallet(chain[0].rpc_url, support.anvil_key(3), chain[2])
    unit = session.contract("ProviderRegistry").functions.pricePerJobUnitOf(market.provider).call()
    escrow = session.contract("JobEscrow")
    funded = submit_job(Lying(100), wallet, model, inputs, 10**16, provider=market.provider, check=False).job
    assert read_job_view(escrow, funded.id).price == funded.price == 4 * unit
    jobs = escrow.functions.jobCount().call()
    with pytest.raises(RenterError, match="nothing was paid"):
        submit_job(Lying(100), wallet, model, inputs, 4 * unit - 1, provider=market.provider, check=False)
    assert escrow.functions.jobCount().call() == jobs
