"""The renter's day at the console against a live backend and anvil: its own jobs and leases
listed newest first, balances, `-o json` on the read commands, contract refusals as sentences
(someone else's job says so), an open challenge in `job status`, an expired or ended lease said
as such, a silent provider refused before paying, and Ctrl-C during `job submit` accounted for."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import backend_support as support
import httpx
import numpy as np
import pytest
import typer
from eth_account import Account

from client.tx import TxSender
from protocol.jobs import encode_output
from renter.cli import balance, job_app, lease_app, model_app
from renter.client import BackendClient
from tests.support.console import Console
from tests.support.waiting import wait_until
from unchained_cli.errors import GuardedGroup

root = typer.Typer(cls=GuardedGroup)  # errors end as `unchained` shows them: one line
root.add_typer(job_app, name="job")
root.add_typer(model_app, name="model")
root.add_typer(lease_app, name="lease")
root.command("balance")(balance)
console = Console(root)
_run, _ok, _chain_args = console.run, console.ok, support.chain_args
STALE_S = 1.0


@pytest.fixture(scope="module")
def server(chain, session, market, tmp_path_factory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The live backend of conftest, with a provider silent for STALE_S taken as gone."""
    support.reverify(session, market)  # jobs run here on the market's provider, slashed after its last round
    with support.live_backend(chain, tmp_path_factory.mktemp("console"), provider_stale_s=STALE_S) as url:
        yield url


AMOUNTS = {"paid", "price", "amount", "provider_earned", "renter_refund", "earned_if_stopped", "refund_if_stopped",
           "bond", "stake"}


def _scripts_read(doc: object) -> list[str]:
    """What `-o json` promises (renter/cli.py's Output): amounts in wei as strings of digits,
    times in unix seconds; the keys that break it."""
    bad = []
    if isinstance(doc, list):
        return [b for item in doc for b in _scripts_read(item)]
    if isinstance(doc, dict):
        for key, value in doc.items():
            if (key in AMOUNTS or key.endswith("_wei")) and value is not None and not str(value).isdigit() \
                    or (key in AMOUNTS or key.endswith("_wei")) and not isinstance(value, str | None):
                bad.append(f"{key}={value!r}")
            elif (key.endswith(("_at", "_until")) or key == "deadline") and not isinstance(value, int | None):
                bad.append(f"{key}={value!r}")
            else:
                bad += _scripts_read(value)
    return bad


def _submitted(server: str, chain, keystore: Path, tmp_path: Path, tag: float, *extra: str):  # type: ignore[no-untyped-def]
    model_file = tmp_path / f"net-{tag}.pt"
    if not model_file.exists():  # one pushed already keeps its bytes (a save is not byte-for-byte repeatable)
        model_file.write_bytes(support.Tagged.torchscript(tag))
    inputs = tmp_path / f"inputs-{tag}"
    inputs.mkdir()
    for i in range(2):
        (inputs / f"{i:03d}.bin").write_bytes(encode_output(np.full(8, i, np.float32)))
    return console.runner.invoke(root, ["job", "submit", "--model", str(model_file), "--inputs", str(inputs), "--max-price",
                                "0.01", "--keystore", str(keystore), "--backend", server, *_chain_args(chain), *extra],
                         terminal_width=300)


def _keystore_of(tmp_path: Path, index: int) -> Path:
    path = tmp_path / f"account-{index}.json"
    path.write_text(json.dumps(Account.encrypt(support.anvil_key(index).key, "correct horse")))
    return path


def test_jobs_listed_newest_first_challenge_shown_and_refusals_as_sentences(  # type: ignore[no-untyped-def]
        server, chain, session, market, keystore, tmp_path) -> None:
    ids = []
    for tag in (41.0, 42.0):
        submitted = _submitted(server, chain, keystore, tmp_path, tag)
        assert submitted.exit_code == 0, submitted.output
        assert "funding tx 0x" in submitted.output  # printed as soon as it is sent
        ids.append(int(re.search(r"job (\d+) funded", submitted.output).group(1)))
    wait_until(lambda: all(httpx.get(f"{server}/jobs/{i}").status_code == 200 for i in ids), 15, "jobs indexed")

    listed = _ok("job", "list", "--keystore", str(keystore), "--backend", server)
    shown = [int(n) for n in re.findall(r"^job (\d+) ", listed, re.M)]
    assert shown[:2] == ids[::-1], listed  # newest first
    assert "0.000002 ETH" in listed and "deadline 20" in listed and market.provider.lower() in listed.lower()
    rows = json.loads(_ok("job", "list", "--address", market.renter, "-o", "json", "--backend", server))
    assert [r["job_id"] for r in rows][:2] == ids[::-1] and {r["renter"] for r in rows} == {market.renter.lower()}
    assert _scripts_read(rows) == []
    stranger = json.loads(_ok("job", "list", "--address", support.anvil_key(7).address, "-o", "json",
                              "--backend", server))
    assert stranger == []

    # An uncommitted job cannot be challenged: a sentence, not `ChallengeJobNotChallengeable(N)`.
    code, said = _run("job", "challenge", str(ids[0]), "--keystore", str(keystore), *_chain_args(chain))
    assert code == 1 and f"job {ids[0]} cannot be challenged now" in said, said
    assert "ChallengeJobNotChallengeable" not in said and "nothing was sent" in said

    support.commit_outputs(session, market.provider, ids[0], [b"a", b"b"])
    _ok("job", "challenge", str(ids[0]), "--keystore", str(keystore), "--k", "2", *_chain_args(chain))
    # Someone else (not a staked verifier) challenging the job is told it is not theirs.
    code, said = _run("job", "challenge", str(ids[0]), "--keystore", str(_keystore_of(tmp_path, 7)),
                      *_chain_args(chain))
    assert code == 1 and "not your job" in said and "ChallengeNotStakedVerifier" not in said, said
    code, said = _run("job", "challenge", str(ids[0]), "--keystore", str(keystore), *_chain_args(chain))
    assert code == 1 and f"job {ids[0]} is already challenged" in said, said
    code, said = _run("job", "refund", str(ids[1]), "--keystore", str(_keystore_of(tmp_path, 7)), *_chain_args(chain))
    assert code == 1 and said.startswith(f"error: not your job: job {ids[1]} belongs to renter"), said

    def challenged() -> dict:  # type: ignore[type-arg]
        return json.loads(_ok("job", "status", str(ids[0]), "-o", "json", "--backend", server, *_chain_args(chain)))

    wait_until(lambda: challenged()["challenges"], 15, "the challenge indexed")
    doc = challenged()
    assert _scripts_read(doc) == []
    assert doc["job_id"] == ids[0] and doc["challenges"][0]["status"] == "open" and doc["frozen"] is True
    text = _ok("job", "status", str(ids[0]), "--backend", server, *_chain_args(chain))
    assert "OPEN: the provider must reveal 2 items by" in " ".join(text.split()) and "frozen" in text
    assert not re.search(r"challenge \d+ by", _ok("job", "status", str(ids[1]), "--backend", server, *_chain_args(chain)))


def test_leases_listed_expired_and_ended_said_so_and_balance(  # type: ignore[no-untyped-def]
        server, chain, session, market, keystore, tmp_path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True)
    code, said = _run("lease", "start", "--provider", market.provider2, "--gpus", "1", "--hours", "0.01",
                      "--ssh-key", str(tmp_path / "id.pub"), "--wait", "0", "--backend", server,
                      "--keystore", str(keystore), *_chain_args(chain))
    assert code == 1 and "no connection details" in said, said
    lease_id = int(re.search(r"lease (\d+):", said).group(1))
    wait_until(lambda: httpx.get(f"{server}/leases/{lease_id}").status_code == 200, 15, "lease indexed")
    listed = _ok("lease", "list", "--keystore", str(keystore), "--backend", server, "--rpc", chain[0].rpc_url)
    assert re.search(rf"^lease {lease_id}  active  1 GPU\(s\)  paid", listed, re.M), listed
    rows = json.loads(_ok("lease", "list", "--address", market.renter, "-o", "json", "--backend", server,
                          "--rpc", chain[0].rpc_url))
    assert rows[0]["lease_id"] == lease_id and rows[0]["state"] == "active"  # newest first

    session.advance(120)  # past its 36 s: active on-chain, but it ran out
    # `lease list` judges by the chain's clock, as `lease status` does: the wall clock is behind it.
    rows = json.loads(_ok("lease", "list", "--address", market.renter, "-o", "json", "--backend", server,
                          "--rpc", chain[0].rpc_url))
    assert rows[0]["lease_id"] == lease_id and rows[0]["state"] == "expired", rows[0]
    assert _scripts_read(rows) == []
    listed = _ok("lease", "list", "--keystore", str(keystore), "--backend", server, "--rpc", chain[0].rpc_url)
    assert re.search(rf"^lease {lease_id}  expired", listed, re.M) and "ran out, not settled" in listed, listed
    status = _ok("lease", "status", str(lease_id), "--backend", server, *_chain_args(chain))
    assert f"lease {lease_id}: expired" in status and "active" not in status and "0 s" not in status, status
    assert f"unchained lease stop {lease_id}" in status
    doc = json.loads(_ok("lease", "status", str(lease_id), "-o", "json", "--backend", server, *_chain_args(chain)))
    assert doc["state"] == "expired" and doc["earned_if_stopped"] == "0" and doc["refund_if_stopped"] == doc["paid"]
    assert _scripts_read(doc) == []
    code, said = _run("lease", "ssh", str(lease_id), "--keystore", str(keystore), "--backend", server,
                      *_chain_args(chain))
    assert code == 1 and f"lease {lease_id} ran out at" in said and "host key" not in said, said

    before = json.loads(_ok("balance", "--keystore", str(keystore), "-o", "json", *_chain_args(chain)))
    assert _scripts_read(before) == []
    assert int(before["wallet_wei"]) == session.web3.eth.get_balance(market.renter)
    _ok("lease", "stop", str(lease_id), "--keystore", str(keystore), *_chain_args(chain))
    code, said = _run("lease", "ssh", str(lease_id), "--keystore", str(keystore), "--backend", server,
                      *_chain_args(chain))
    assert code == 1 and f"lease {lease_id} has ended" in said and "host key" not in said, said
    code, said = _run("lease", "stop", str(lease_id), "--keystore", str(keystore), *_chain_args(chain))
    assert code == 1 and f"lease {lease_id} has ended" in said and "LeaseManagerNotActive" not in said, said

    after = json.loads(_ok("balance", "--address", market.renter, "-o", "json", *_chain_args(chain)))
    owed = {(o["contract"], o["what"]): int(o["amount"]) for o in after["owed"]}
    was = {(o["contract"], o["what"]): int(o["amount"]) for o in before["owed"]}
    paid = int(rows[0]["paid"])
    assert owed[("LeaseManager", "owed balance")] - was.get(("LeaseManager", "owed balance"), 0) == paid
    text = _ok("balance", "--keystore", str(keystore), *_chain_args(chain))
    assert "LeaseManager owed balance" in text and "unchained withdraw" in text and market.renter in text


def test_lease_start_refuses_a_provider_whose_heartbeats_stopped(  # type: ignore[no-untyped-def]
        server, chain, session, market, keystore, tmp_path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True)
    provider = BackendClient.connect(server, support.anvil_key(2))
    assert provider.http.post(f"/providers/{market.provider2}/heartbeat", headers=provider._auth()).status_code == 204
    wait_until(lambda: httpx.get(f"{server}/providers/{market.provider2.lower()}").json()["agent_silent"] is True,
               10 + STALE_S, "the provider taken as gone")
    leases_before = session.contract("LeaseManager").functions.leaseCount().call()
    code, said = _run("lease", "start", "--provider", market.provider2, "--gpus", "1", "--hours", "1",
                      "--ssh-key", str(tmp_path / "id.pub"), "--wait", "0", "--backend", server,
                      "--keystore", str(keystore), *_chain_args(chain))
    assert code == 1 and "has not sent a heartbeat since" in said and "nothing was paid" in said, said
    assert session.contract("LeaseManager").functions.leaseCount().call() == leases_before


def test_ctrl_c_in_job_submit_says_what_was_paid(server, chain, session, keystore, tmp_path,  # type: ignore[no-untyped-def]
                                                  monkeypatch) -> None:
    escrow = session.contract("JobEscrow")
    before = escrow.functions.jobCount().call()

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:  # Ctrl-C before the funding transaction leaves
        patch.setattr(TxSender, "broadcast", interrupted)
        refused = _submitted(server, chain, keystore, tmp_path, 51.0)
    assert refused.exit_code == 130 and "nothing was paid" in refused.output, refused.output
    assert escrow.functions.jobCount().call() == before

    mined = TxSender.mined

    def mined_then_interrupted(self, tx_hash, what):  # type: ignore[no-untyped-def]
        mined(self, tx_hash, what)
        raise KeyboardInterrupt  # Ctrl-C just after the receipt came

    monkeypatch.setattr(TxSender, "mined", mined_then_interrupted)
    funded = _submitted(server, chain, keystore, tmp_path, 52.0)
    said = " ".join(funded.output.split())
    job_id = escrow.functions.jobCount().call()
    assert job_id == before + 1
    assert funded.exit_code == 130 and f"job {job_id} was funded" in said, said
    assert f"unchained job status {job_id}" in said


def test_job_submit_with_a_model_file_keeps_the_name_it_was_pushed_under(  # type: ignore[no-untyped-def]
        server, chain, keystore, tmp_path) -> None:
    """`model push FILE --name` then `job submit --model FILE` (the same bytes): the hub entry
    keeps the name given, not the file name the submit would push it under."""
    model_file = tmp_path / "net-61.0.pt"
    model_file.write_bytes(support.Tagged.torchscript(61.0))
    pushed = _ok("model", "push", str(model_file), "--name", "my resnet", "--keystore", str(keystore),
                 "--backend", server)
    content_hash = re.search(r"model (0x[0-9a-f]{64})", pushed).group(1)
    submitted = _submitted(server, chain, keystore, tmp_path, 61.0)
    assert submitted.exit_code == 0, submitted.output
    rows = json.loads(_ok("model", "list", "--keystore", str(keystore), "--backend", server, "-o", "json"))
    [row] = [r for r in rows if r["content_hash"] == content_hash]
    assert row["name"] == "my resnet", row
