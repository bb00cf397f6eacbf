"""The deployment a party trusts, read from its file (`deployments/<chainId>.json` by default, where
`unchained deploy` writes it). Apart from client.chain so that a command reading through
client.node_reads loads it without web3."""

from __future__ import annotations

import json
from pathlib import Path

from client.errors import DeploymentUnreadable
from protocol.deployments import Deployment, DeploymentFormatError

DEPLOYMENTS_DIR = Path("deployments")  # relative: the current directory's, as `unchained deploy` writes it


def deployment_path(chain_id: int, file: Path | None = None, directory: Path = DEPLOYMENTS_DIR) -> Path:
    """`file` when given, else `<directory>/<chainId>.json`."""
    return file if file is not None else directory / f"{chain_id}.json"


def load_deployment(chain_id: int, file: Path | None = None, directory: Path = DEPLOYMENTS_DIR) -> Deployment:
    """The deployment to trust on chain `chain_id` (the node's): `file`, or the directory's
    `<chainId>.json`. A document written for another chain is refused: its addresses there hold
    other code, or none."""
    path = deployment_path(chain_id, file, directory)
    try:
        deployment = Deployment.from_json(json.loads(path.read_text()))
    except OSError as exc:
        raise DeploymentUnreadable(path, exc.strerror or str(exc)) from exc
    except (json.JSONDecodeError, DeploymentFormatError) as exc:
        raise DeploymentUnreadable(path, str(exc)) from exc
    if deployment.chain_id != chain_id:
        raise DeploymentUnreadable(path, f"it is for chain {deployment.chain_id}, the node is chain {chain_id}")
    return deployment


__all__ = ["DEPLOYMENTS_DIR", "deployment_path", "load_deployment"]
