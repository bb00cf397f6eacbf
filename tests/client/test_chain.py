"""client.chain: the one deployment loader (one default, refuses another chain's document) and the
one chain context every party's chain object is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from web3 import Web3

from client.chain import DEPLOYMENTS_DIR, ChainContext, deployment_path, load_deployment
from client.errors import DeploymentUnreadable
from protocol.deployments import DeployedContract, Deployment

ABI = [{"type": "function", "name": "ping", "inputs": [], "outputs": [], "stateMutability": "view"}]


def _deployment(chain_id: int) -> Deployment:
    return Deployment(chain_id, "0x" + "11" * 20, {"JobEscrow": DeployedContract("0x" + "ab" * 20, ABI, 7)})


def _written(directory: Path, deployment: Deployment, name: str | None = None) -> Path:
    path = directory / (name or f"{deployment.chain_id}.json")
    path.write_text(json.dumps(deployment.to_json()))
    return path


def test_the_default_is_the_current_directorys_deployments_by_chain_id(tmp_path: Path) -> None:
    assert deployment_path(31337) == DEPLOYMENTS_DIR / "31337.json" == Path("deployments/31337.json")
    assert deployment_path(31337, directory=tmp_path) == tmp_path / "31337.json"
    assert deployment_path(31337, file=tmp_path / "mine.json", directory=Path("elsewhere")) == tmp_path / "mine.json"


def test_a_written_deployment_reads_back_from_a_directory_or_a_file(tmp_path: Path) -> None:
    written = _deployment(31337)
    _written(tmp_path, written)
    assert load_deployment(31337, directory=tmp_path) == written
    assert load_deployment(31337, file=_written(tmp_path, written, "named.json")) == written


def test_a_missing_file_says_which_path(tmp_path: Path) -> None:
    with pytest.raises(DeploymentUnreadable, match=r"cannot read deployment .*31337\.json") as caught:
        load_deployment(31337, directory=tmp_path)
    assert caught.value.path == tmp_path / "31337.json"


def test_a_malformed_document_is_refused(tmp_path: Path) -> None:
    (tmp_path / "31337.json").write_text('{"chainId": 31337, "contracts": {"Staking": {"address": "0x1"}}}')
    with pytest.raises(DeploymentUnreadable, match="malformed deployment document"):
        load_deployment(31337, directory=tmp_path)
    (tmp_path / "31337.json").write_text("{not json")
    with pytest.raises(DeploymentUnreadable, match="31337.json"):
        load_deployment(31337, directory=tmp_path)


def test_another_chains_deployment_is_refused(tmp_path: Path) -> None:
    """Its addresses on the node's chain hold other code, or none: trusting them would send
    money to whatever lives there."""
    path = _written(tmp_path, _deployment(1), "31337.json")
    with pytest.raises(DeploymentUnreadable, match="it is for chain 1, the node is chain 31337"):
        load_deployment(31337, file=path)


def test_a_context_binds_each_contract_once_and_names_the_escrow_domain() -> None:
    context = ChainContext(Web3(), _deployment(31337))
    assert context.contract("JobEscrow") is context.contract("JobEscrow")
    domain = context.escrow_domain()
    assert (domain.chain_id, domain.escrow) == (31337, Web3.to_checksum_address("0x" + "ab" * 20))
