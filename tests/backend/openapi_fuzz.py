"""A small schema-driven fuzzer for the backend's OpenAPI document.

schemathesis (and hypothesis-jsonschema) need hypothesis >= 6.84, while eth-brownie pins
hypothesis 6.27.3, so this generator walks the schema itself: for every operation it builds
requests whose parameters and bodies are valid, boundary or wrong values of each declared
type, plus arbitrary JSON and bytes, with and without a real session."""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

STRANGE_STRINGS = ["", " ", "0", "-1", "x" * 300, "0x", "0x" + "g" * 40, "../../etc/passwd", "%00", "null",
                   "\u202e\u0000", "🙂", "' OR 1=1 --", "<script>", "1e309", "NaN"]
STRANGE_INTS = [0, 1, -1, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**80, -(2**63) - 1]


@dataclass
class Case:
    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    json_body: Any = None
    content: bytes | None = None


class Fuzzer:
    def __init__(self, schema: dict[str, Any], seed: int = 0) -> None:
        self.schema = schema
        self.rng = random.Random(seed)

    def _resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            node = self.schema["components"]["schemas"][name]
        return node

    def value(self, node: dict[str, Any], depth: int = 0) -> Any:
        """A value that is often valid for the schema and often not."""
        node = self._resolve(node)
        if self.rng.random() < 0.15 or depth > 4:
            return self.junk()
        for key in ("anyOf", "oneOf"):
            if key in node:
                return self.value(self.rng.choice(node[key]), depth + 1)
        kind = node.get("type")
        if kind == "integer":
            low, high = int(node.get("minimum", -(2**40))), int(node.get("maximum", 2**40))
            return self.rng.choice([low, high, low - 1, high + 1, self.rng.randint(low, high),
                                    self.rng.choice(STRANGE_INTS)])
        if kind == "number":
            return self.rng.choice([0.0, -1.5, 1e308, self.rng.random()])
        if kind == "boolean":
            return self.rng.choice([True, False])
        if kind == "string":
            return self.string(node)
        if kind == "array":
            return [self.value(node.get("items", {}), depth + 1) for _ in range(self.rng.choice([0, 1, 3, 40]))]
        if kind == "object" or "properties" in node:
            props = node.get("properties", {})
            out = {k: self.value(v, depth + 1) for k, v in props.items() if self.rng.random() < 0.85}
            if self.rng.random() < 0.2:
                out[self.word()] = self.junk()
            return out
        return self.junk()

    def string(self, node: dict[str, Any]) -> str:
        pattern = node.get("pattern", "")
        roll = self.rng.random()
        if roll < 0.3:
            return self.rng.choice(STRANGE_STRINGS)
        if "0-9a-fA-F]{40}" in pattern:
            return "0x" + "".join(self.rng.choice("0123456789abcdefABCDEF") for _ in range(40))
        if "0-9a-f]{64}" in pattern:
            return "0x" + "".join(self.rng.choice("0123456789abcdef") for _ in range(64))
        if "0-9a-fA-F]{130}" in pattern:
            return "0x" + "".join(self.rng.choice("0123456789abcdef") for _ in range(130))
        if "[0-9]{1,78}" in pattern:
            return str(self.rng.choice([0, 1, 10**18, 10**77, 2**256]))
        return self.word(self.rng.choice([1, 8, 40, 200]))

    def word(self, size: int = 8) -> str:
        return "".join(self.rng.choice(string.ascii_letters + string.digits + "-_.") for _ in range(size))

    def junk(self) -> Any:
        return self.rng.choice([None, True, -1, 2**70, 1.5, "", self.word(), [], [1, "a", None], {"a": {"b": []}},
                                self.rng.choice(STRANGE_STRINGS)])

    def cases(self, per_operation: int, token: str | None) -> Iterator[Case]:
        for path, methods in self.schema["paths"].items():
            for method, op in methods.items():
                for _ in range(per_operation):
                    yield self.case(path, method.upper(), op, token)

    def case(self, path: str, method: str, op: dict[str, Any], token: str | None) -> Case:
        case = Case(method, path)
        for param in op.get("parameters", []):
            value = self.value(param.get("schema", {}))
            if param["in"] == "path":
                text = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
                case.path = case.path.replace("{" + param["name"] + "}", quote(text, safe="") or "%20")
            elif param["in"] == "query" and self.rng.random() < 0.8:
                case.params[param["name"]] = value if not isinstance(value, (dict, list)) else json.dumps(value)
            elif param["in"] == "header" and self.rng.random() < 0.8:
                case.headers[param["name"]] = "".join(ch for ch in str(value) if 32 <= ord(ch) < 127)
        if token and self.rng.random() < 0.7:
            case.headers["Authorization"] = f"Bearer {token}"
        elif self.rng.random() < 0.3:
            case.headers["Authorization"] = self.rng.choice(["Bearer ", "Bearer x", "Basic abc", "Bearer " + "a" * 500])
        body = op.get("requestBody", {}).get("content", {})
        if "application/json" in body:
            roll = self.rng.random()
            if roll < 0.7:
                case.json_body = self.value(body["application/json"].get("schema", {}))
            elif roll < 0.85:
                case.content = bytes(self.rng.getrandbits(8) for _ in range(self.rng.choice([0, 1, 50])))
                case.headers["Content-Type"] = "application/json"
        elif "application/octet-stream" in body:
            case.content = bytes(self.rng.getrandbits(8) for _ in range(self.rng.choice([0, 1, 64, 5000])))
        return case
