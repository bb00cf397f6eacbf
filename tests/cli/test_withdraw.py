"""`unchained withdraw` on anvil: every balance the contracts owe the caller is paid out, one line
each (JobEscrow in ETH and in a token, LeaseManager, unbonded stake), signed with the caller's
own keystore; then "nothing owed" and the stake still unbonding with its date."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner
from web3 import Web3

from client.escrow_jobs import read_job
from client.keystore import PASSWORD_FILE_ENV, new_keystore
from unchained_cli.deploy import DeployParams, Deployer, deploy_all, write_deployment
from unchained_cli.main import app
from devtools.market import dev_account
from devtools.session import ChainSession

ETH = 10**18
DELAY = 7 * 24 * 3600
runner = CliRunner()


@pytest.fixture(scope="module")
def chain(tmp_path_factory, chains):
    """The session chain, with a second contract set of its own unbonding delay deployed on it."""
    local = chains.get().local
    deployment = deploy_all(Deployer.connect(local.rpc_url), DeployParams(unbonding_delay=DELAY,
                                                                                  max_job_duration=DELAY // 2))
    path = write_deployment(deployment, tmp_path_factory.mktemp("deployments"))
    return ChainSession.connect(local.rpc_url, deployment), local.rpc_url, path


def withdraw(rpc: str, deployment: Path, keystore: Path, password_file: Path) -> tuple[int, str]:
    result = runner.invoke(app, ["withdraw", "--rpc", rpc, "--deployment", str(deployment), "--keystore",
                                 str(keystore), "--password-file", str(password_file)],
                           env={PASSWORD_FILE_ENV: ""}, terminal_width=80)
    return result.exit_code, result.output


def test_withdraw_pays_every_owed_balance_once_then_nothing(chain, tmp_path: Path) -> None:
    s, rpc, deployment = chain
    provider, renter = s.accounts[1], s.accounts[3]
    account = dev_account(3)
    assert account.address == renter
    keystore = new_keystore(tmp_path, "renter pw", account.key, kdf="scrypt", iterations=1 << 10).path
    password = tmp_path / "pw"
    password.write_text("renter pw\n")
    escrow, leases, staking = s.contract("JobEscrow"), s.contract("LeaseManager"), s.contract("Staking")
    token = s.contract("TestStablecoin")

    s.send(staking.functions.stake(), provider, value=ETH)
    s.send(s.contract("ProviderRegistry").functions.register(b"CPU".ljust(32, b"\0"), [b"\x01" * 32], ETH // 100,
                                                              10**12, ""), provider)
    deadline = s.now() + 3600
    # Two jobs cancelled (ETH and tUSD), a lease ended at once, stake unbonded past its delay.
    s.send(escrow.functions.createJob(provider, b"\x11" * 32, ETH // 20, deadline), renter, value=ETH // 20)
    cancel_last_job(s, escrow, renter)
    s.send(token.functions.mint(renter, 5_000_000), renter)
    s.send(token.functions.approve(escrow.address, 2_500_000), renter)
    s.send(escrow.functions.createJobWithToken(provider, token.address, b"\x22" * 32, 2_500_000, deadline), renter)
    cancel_last_job(s, escrow, renter)
    cost = leases.functions.leaseCost(provider, 1, 3600).call()
    s.send(leases.functions.startLease(provider, 1, 3600), renter, value=cost)
    s.send(leases.functions.endLease(leases.functions.leaseCount().call()), renter)
    lease_refund = leases.functions.owedTo(renter).call()
    assert 0 < lease_refund <= cost
    s.send(staking.functions.stake(), renter, value=ETH)
    s.send(staking.functions.requestUnbond(4 * ETH // 10), renter)
    s.advance(DELAY + 1)

    wrong = tmp_path / "wrong"
    wrong.write_text("not it\n")
    nonce = s.web3.eth.get_transaction_count(renter)
    code, out = withdraw(rpc, deployment, keystore, wrong)
    assert code == 1 and out.strip() == f"error: wrong password for keystore {keystore}"
    assert s.web3.eth.get_transaction_count(renter) == nonce

    before = s.balance(renter)
    code, out = withdraw(rpc, deployment, keystore, password)
    assert code == 0, out
    lines = out.strip().splitlines()
    shown = [re.sub(r" \(tx 0x[0-9a-f]{64}\)$", "", line) for line in lines]
    assert shown == ["JobEscrow owed balance: 0.05 ETH",
                     "JobEscrow owed balance: 2.5 tUSD",
                     f"LeaseManager owed balance: {Web3.from_wei(lease_refund, 'ether').normalize():f} ETH",
                     "Staking unbonded stake: 0.4 ETH"], out
    gas = sum(r["gasUsed"] * r["effectiveGasPrice"] for r in (
        s.web3.eth.get_transaction_receipt(line[-65:-1]) for line in lines))
    assert s.balance(renter) == before + ETH // 20 + lease_refund + 4 * ETH // 10 - gas
    assert token.functions.balanceOf(renter).call() == 5_000_000
    assert escrow.functions.owedTo("0x" + "00" * 20, renter).call() == 0
    assert escrow.functions.owedTo(token.address, renter).call() == 0
    assert leases.functions.owedTo(renter).call() == 0 and staking.functions.unbondingOf(renter).call().amount == 0

    s.send(staking.functions.requestUnbond(ETH // 10), renter)
    code, out = withdraw(rpc, deployment, keystore, password)
    assert code == 0, out
    lines = out.strip().splitlines()
    assert lines[0] == f"nothing owed to {renter}"
    assert re.fullmatch(r"Staking: 0\.1 ETH still unbonding until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC "
                        r"\(in 168 h 0 min\); run withdraw again then", lines[1]), lines


def cancel_last_job(s, escrow, renter: str) -> None:
    """The renter's two-step cancel of the newest job: request, the grace passes, cancel."""
    job = read_job(escrow, escrow.functions.jobCount().call()).as_tuple()
    s.send(escrow.functions.requestCancel(job), renter)
    s.advance(escrow.functions.cancelGrace().call())
    s.send(escrow.functions.cancel(job), renter)


def test_a_balance_worth_less_than_its_gas_is_asked_about_and_kept_unless_yes(chain, tmp_path: Path) -> None:
    """Withdrawing a 1000 wei refund costs far more in gas: at a terminal the user is asked (no
    keeps it owed, yes pays it), without one it is kept without reading stdin; a balance worth
    its gas is paid without a question, and --yes pays the small one too."""
    s, rpc, deployment = chain
    provider, renter = s.accounts[7], s.accounts[6]
    keystore = new_keystore(tmp_path, "pw", dev_account(6).key, kdf="scrypt", iterations=1 << 10).path
    password = tmp_path / "pw"
    password.write_text("pw\n")
    escrow, leases = s.contract("JobEscrow"), s.contract("LeaseManager")
    s.send(s.contract("Staking").functions.stake(), provider, value=ETH)
    s.send(s.contract("ProviderRegistry").functions.register(b"CPU".ljust(32, b"\0"), [b"\x07" * 32], ETH // 100,
                                                              10**12, ""), provider)

    def tiny_refund() -> None:
        s.send(escrow.functions.createJob(provider, b"\x33" * 32, 1000, s.now() + 3600), renter, value=1000)
        cancel_last_job(s, escrow, renter)

    def owed() -> int:
        return escrow.functions.owedTo("0x" + "00" * 20, renter).call()

    tiny_refund()
    cost = leases.functions.leaseCost(provider, 1, 3600).call()
    s.send(leases.functions.startLease(provider, 1, 3600), renter, value=cost)
    s.send(leases.functions.endLease(leases.functions.leaseCount().call()), renter)
    args = ["withdraw", "--rpc", rpc, "--deployment", str(deployment), "--keystore", str(keystore),
            "--password-file", str(password)]

    result = runner.invoke(app, args, input="y\n", env={PASSWORD_FILE_ENV: ""}, terminal_width=200)
    said = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "JobEscrow owed balance: 0.000000000000001 ETH, but its gas would cost about" in said, said
    assert "more than it pays out: kept (still owed; `unchained withdraw --yes` pays it out)" in said, said
    assert "anyway" not in said and owed() == 1000  # stdin is no terminal: not read, not asked
    assert leases.functions.owedTo(renter).call() == 0  # worth its gas: paid without a question

    assert _at_a_terminal(args, "n") == 0 and owed() == 1000
    result = runner.invoke(app, [*args, "--yes"], env={PASSWORD_FILE_ENV: ""}, terminal_width=200)
    assert result.exit_code == 0 and "gas would cost" not in result.output, result.output
    assert re.match(r"JobEscrow owed balance: 0\.000000000000001 ETH \(tx 0x[0-9a-f]{64}\)$", result.output.strip())
    assert owed() == 0
    tiny_refund()
    assert _at_a_terminal(args, "y") == 0 and owed() == 0


def _at_a_terminal(args: list[str], answer: str) -> int:
    """`unchained ARGS` with a pseudo-terminal as its stdin and stdout, answering its question
    once asked; its exit status."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "unchained_cli.main", *args], stdin=slave, stdout=slave,
                            stderr=slave, env={**os.environ, PASSWORD_FILE_ENV: ""})
    os.close(slave)
    seen = b""
    try:
        while b"Withdraw it anyway? [y/N]: " not in seen:
            ready, _, _ = select.select([master], [], [], 120)
            assert ready, f"no question within 120 s: {seen!r}"
            seen += os.read(master, 4096)
        os.write(master, answer.encode() + b"\n")
        return proc.wait(timeout=120)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
