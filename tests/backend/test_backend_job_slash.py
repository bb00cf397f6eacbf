"""`unchained job slash ID` and what `job result` says of a signed result (issue 32): a renter
slashes a provider that promised its commit before the deadline and never made it, and is told
why not (and from when) otherwise; a result signed without a margin is shown NOT BINDING and is
not slashable for a missing commit."""

from __future__ import annotations

import time

import backend_support as support
import typer
from typer.testing import CliRunner

from client.backend_http import ApiError
from renter.cli import job_app
from renter.client import BackendClient
from protocol.job_result import EscrowDomain, JobResult, SignedJobResult
from protocol.merkle import MerkleTree, keccak256, leaf_hash
from unchained_cli.errors import GuardedGroup

root = typer.Typer(cls=GuardedGroup)
root.add_typer(job_app, name="job")
runner = CliRunner()
ZERO = "0x" + "00" * 20
PRICE = 10**15
OUTPUTS = [b"slash-cli-%d" % i for i in range(3)]


def _said(*args: str, code: int = 0) -> str:
    result = runner.invoke(root, list(args), terminal_width=300)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def _delivered(server: str, session, market, margin: int) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """A funded job whose provider delivered a result signed with commitBy `margin` seconds
    before the deadline, and its outputs; (job id, deadline)."""
    escrow = session.contract("JobEscrow")
    deadline = session.now() + 3600
    session.send(escrow.functions.createJob(market.provider, keccak256(b"slash-cli"), PRICE, deadline),
                 market.renter, value=PRICE)
    job_id = escrow.functions.jobCount().call()
    api = BackendClient.connect(server)
    end = time.monotonic() + 20
    while True:
        try:
            api.get(f"/jobs/{job_id}")
            break
        except ApiError:
            assert time.monotonic() < end, f"job {job_id} never indexed"
            time.sleep(0.1)
    tree = MerkleTree([leaf_hash(keccak256(o)) for o in OUTPUTS])
    result = JobResult(job_id, "0x" + tree.root.hex(), len(OUTPUTS), "0x" + keccak256(b"".join(OUTPUTS)).hex(),
                       deadline - margin)
    domain = EscrowDomain(session.deployment.chain_id, escrow.address)
    provider = BackendClient(BackendClient.connect(server).http, support.anvil_key(1))
    doc = SignedJobResult.sign(result, domain, support.anvil_key(1)).to_json()
    assert provider.http.put(f"/jobs/{job_id}/signed-result", json=doc, headers=provider._auth()).status_code == 200
    for i, data in enumerate(OUTPUTS):
        provider.upload_output(job_id, i, data, tree.proof(i))
    return job_id, deadline


def test_job_slash_slashes_a_promised_commit_that_never_came_and_says_why_not_otherwise(  # type: ignore[no-untyped-def]
        server, chain, session, market, keystore, tmp_path) -> None:
    common = ("--keystore", str(keystore), "--rpc", chain[0].rpc_url, "--deployment", str(chain[2]),
              "--backend", server)
    promised, _ = _delivered(server, session, market, margin=60)
    loose, _ = _delivered(server, session, market, margin=0)
    shown = _said("job", "result", str(promised), "--out", str(tmp_path / "a"), *common)
    assert "on-chain commit is pending, promised by" in shown and f"unchained job slash {promised}" in shown
    shown = _said("job", "result", str(loose), "--out", str(tmp_path / "b"), *common)
    assert "NOT BINDING" in shown

    early = _said("job", "slash", str(promised), *common, code=1)
    assert "has not passed" in early
    session.advance(3601)
    staking, escrow = session.contract("Staking"), session.contract("JobEscrow")
    stake, owed = staking.functions.stakeOf(market.provider).call(), escrow.functions.owedTo(ZERO, market.renter).call()
    said = _said("job", "slash", str(promised), *common)
    assert "slashed" in said and "never committed" in said and "credited back" in said
    minimum = session.contract("ProviderRegistry").functions.minProviderStake().call()
    assert staking.functions.stakeOf(market.provider).call() == stake - minimum
    assert escrow.functions.owedTo(ZERO, market.renter).call() == owed + PRICE
    assert "not binding" in _said("job", "slash", str(loose), *common, code=1)
    assert staking.functions.stakeOf(market.provider).call() == stake - minimum
    assert "already slashed" in _said("job", "slash", str(promised), *common, code=1)
