"""The shape of deployments/<chainId>.json: where every contract lives and its ABI.

Pure data: parsing and serialising only; reading the file is each service's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class DeploymentFormatError(ValueError):
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


def error_signatures(abi: list[dict[str, Any]]) -> dict[bytes, tuple[str, list[str]]]:
    """Custom errors of an ABI by 4-byte selector: name and argument types."""
    from eth_utils import keccak

    found = {}
    for item in abi:
        if item.get("type") == "error":
            types = [arg["type"] for arg in item.get("inputs", [])]
            signature = f"{item['name']}({','.join(types)})"
            found[keccak(text=signature)[:4]] = (item["name"], types)
    return found


def describe_revert(deployment: Deployment, data: str | bytes) -> str:
    """Turns revert data into `ErrorName(arg, ...)` using every ABI of the deployment."""
    from eth_abi import decode

    raw = bytes.fromhex(data[2:] if data.startswith("0x") else data) if isinstance(data, str) else data
    selector, body = raw[:4], raw[4:]
    for contract in deployment.contracts.values():
        known = error_signatures(contract.abi).get(selector)
        if known:
            name, types = known
            try:
                args = decode(types, body)
            except Exception:  # malformed revert data: report the name alone
                return f"{name}(<undecodable arguments>)"
            shown = ", ".join(a.hex() if isinstance(a, bytes) else str(a) for a in args)
            return f"{name}({shown})"
    return f"unknown revert 0x{raw.hex()}"
