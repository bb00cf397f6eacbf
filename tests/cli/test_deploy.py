"""`unchained deploy` on a real anvil: every contract deployed, wired and recorded."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from web3 import Web3

from client import contracts
from client.ports import free_port
from protocol.deployments import Deployment, DeploymentFormatError
from unchained_cli.deploy import DeployError, DeployParams, deploy_all
from devtools.demo import DEMO_PLAN
from devtools.market import FAST_PARAMS
from devtools.up import LOCAL_PARAMS

CONTRACTS = {"Staking", "ProviderRegistry", "JobEscrow", "LeaseManager", "ProofOfGpu",
             "DisputeCommittee", "ChallengeManager", "TestStablecoin"}
UNCHAINED = str(Path(sys.executable).with_name("unchained"))


@pytest.fixture(scope="module")
def chain(chains):
    """The session chain (reverted afterwards): the deploy adds a second contract set to it."""
    return chains.get().local


def test_deploy_writes_addresses_and_abis_wires_roles_and_says_what_the_operator_keeps(chain, tmp_path):
    result = subprocess.run([UNCHAINED, "deploy", "--rpc", chain.rpc_url, "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    deployment = Deployment.from_json(json.loads((tmp_path / "31337.json").read_text()))
    assert set(deployment.contracts) == CONTRACTS
    web3 = Web3(Web3.HTTPProvider(chain.rpc_url))
    for contract in deployment.contracts.values():
        assert web3.eth.get_code(contract.address), f"no code at {contract.address}"

    def bound(name):
        return contracts.deployed(web3, deployment, name)

    staking, escrow, registry = bound("Staking"), bound("JobEscrow"), bound("ProviderRegistry")
    challenges, pog, committee = bound("ChallengeManager"), bound("ProofOfGpu"), bound("DisputeCommittee")
    assert staking.functions.hasRole(staking.functions.SLASHER_ROLE().call(), challenges.address).call()
    assert staking.functions.hasRole(staking.functions.SLASHER_ROLE().call(), escrow.address).call()
    assert escrow.functions.hasRole(escrow.functions.DISPUTE_ROLE().call(), challenges.address).call()
    assert registry.functions.hasRole(registry.functions.POG_ROLE().call(), pog.address).call()
    assert committee.functions.hasRole(committee.functions.OPENER_ROLE().call(), challenges.address).call()
    assert staking.functions.hasRole(staking.functions.LOCKER_ROLE().call(), bound("LeaseManager").address).call()
    # Nobody else got the power to slash: not even the deployer, who cannot grant any role either.
    assert not staking.functions.hasRole(staking.functions.SLASHER_ROLE().call(), deployment.deployer).call()
    for contract in (staking, escrow, registry, committee):
        assert contract.functions.wired().call()
        assert not contract.functions.hasRole(b"\0" * 32, deployment.deployer).call()
    # What the operator keeps is printed and recorded: the treasury, and the shares it receives.
    operator = deployment.operator
    assert operator["treasury"] == deployment.deployer
    assert operator["treasuryReceives"] == {"JobEscrow.protocolFeeBps": 200, "ChallengeManager.feeBps": 200,
                                            "Staking.slashShareBps": 5_000}
    assert operator["roles"]["Staking"]["SLASHER_ROLE"] == [f"ChallengeManager {challenges.address}",
                                                            f"JobEscrow {escrow.address}"]
    assert "the operator keeps the treasury address only" in result.stdout
    assert f"treasury {deployment.deployer}" in result.stdout


def test_deploy_to_a_dead_rpc_fails_with_a_clear_error(tmp_path):
    result = subprocess.run([UNCHAINED, "deploy", "--rpc", f"http://127.0.0.1:{free_port()}", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.startswith("error: no JSON-RPC node answers") and len(result.stderr.splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_malformed_deployment_document_is_refused():
    with pytest.raises(DeploymentFormatError):
        Deployment.from_json({"chainId": 1, "contracts": {"Staking": {"address": "0x1"}}})


@pytest.mark.parametrize("params", [DeployParams(), LOCAL_PARAMS, FAST_PARAMS, DEMO_PLAN.params])
def test_every_shipped_parameter_set_keeps_a_signed_result_slashable_after_the_latest_deadline(params):
    """Attack: with `unchained up`'s 2-day unbonding and 7-day jobs, a provider signed a result,
    never committed, unbonded at once and withdrew before the deadline: the slash took 0."""
    params.check()
    assert params.unbonding_delay >= params.max_job_duration + params.challenge_window


def test_an_unbonding_delay_shorter_than_a_job_and_its_slash_window_is_refused_before_deploying():
    with pytest.raises(DeployError, match="shorter than the longest job"):
        deploy_all(None, DeployParams(unbonding_delay=2 * 86400, max_job_duration=7 * 86400))  # type: ignore[arg-type]
