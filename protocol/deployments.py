"""The shape of deployments/<chainId>.json: where every contract lives and its ABI.

Pure data: parsing and serialising only; reading the file is each service's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ProtocolError


class DeploymentFormatError(ProtocolError):
    """A deployment document is missing a field or has one of the wrong type."""


@dataclass(frozen=True)
class DeployedContract:
    address: str
    abi: list[dict[str, Any]]
    block: int


@dataclass(frozen=True)
class Deployment:
    chain_id: int
    deployer: str
    contracts: dict[str, DeployedContract]
    # What the operator keeps after deployment (treasury, shares it receives, role holders);
    # empty in documents written before it was recorded.
    operator: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "chainId": self.chain_id,
            "deployer": self.deployer,
            "operator": self.operator,
            "contracts": {
                name: {"address": c.address, "block": c.block, "abi": c.abi}
                for name, c in self.contracts.items()
            },
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "Deployment":
        try:
            contracts = {
                name: DeployedContract(address=str(c["address"]), abi=list(c["abi"]), block=int(c["block"]))
                for name, c in dict(doc["contracts"]).items()
            }
            operator = dict(doc.get("operator") or {})
            return cls(chain_id=int(doc["chainId"]), deployer=str(doc["deployer"]), contracts=contracts,
                       operator=operator)
        except (KeyError, TypeError, ValueError) as exc:
            raise DeploymentFormatError(f"malformed deployment document: {exc!r}") from exc

    def contract(self, name: str) -> DeployedContract:
        try:
            return self.contracts[name]
        except KeyError:
            raise DeploymentFormatError(f"deployment on chain {self.chain_id} has no {name}") from None
