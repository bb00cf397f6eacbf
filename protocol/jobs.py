"""Job specs and item outputs: canonical bytes that every party hashes the same way.

A job spec is canonical JSON (sorted keys, no spaces, integers only: wei as decimal strings,
tolerances in parts per million) and `specHash = keccak256(canonical bytes)` is what the escrow
stores. An item's output is encoded as a small JSON header and the raw little-endian array bytes;
its digest (a Merkle leaf of the job's output root) is keccak256 of that encoding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from protocol.errors import ProtocolError
from protocol.merkle import Hash32, keccak256
from protocol.model_formats import MODEL_FORMATS as MODEL_FORMATS  # its home is the numpy-free module

MAX_SPEC_BYTES = 64 * 1024
MAX_ITEMS = 100_000
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
# PUT /jobs/{id}/outputs (several items in one request): its JSON body, base64 bytes and proofs.
MAX_OUTPUTS_BODY_BYTES = 4 * 1024 * 1024
# PUT /jobs/{id}/signed-result: the signed result's fields and one PUT /jobs/{id}/outputs body's items.
MAX_RESULT_BODY_BYTES = MAX_OUTPUTS_BODY_BYTES + 4096
# GET /jobs/{id}/outputs and /inputs (several items of a job in one answer): items asked at most.
MAX_ITEMS_PER_READ = 256
# POST /inputs/batch (several of a renter's inputs in one request): its JSON body, base64 bytes.
MAX_INPUTS_BODY_BYTES = 4 * 1024 * 1024
OUTPUT_DTYPES = ("float32", "float16", "int64", "int32", "uint8")

_HASH = re.compile(r"^0x[0-9a-f]{64}$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


T = TypeVar("T")


def base64_size(size: int) -> int:
    """Characters of `size` bytes in base64, as the several-items bodies carry them."""
    return (size + 2) // 3 * 4


def request_groups(items: Iterable[T], cost: Callable[[T], int], limit: int) -> Iterator[list[T]]:
    """`items` in order, in groups whose costs add up to at most `limit` (the requests of several
    items: PUT /jobs/{id}/outputs, POST /inputs/batch); an item too large to share goes alone."""
    group: list[T] = []
    size = 0
    for item in items:
        item_cost = cost(item)
        if group and size + item_cost > limit:
            yield group
            group, size = [], 0
        group.append(item)
        size += item_cost
    if group:
        yield group


class JobSpecError(ProtocolError):
    """A job spec or an output encoding is malformed; the message says which field and why."""


@dataclass(frozen=True)
class JobSpec:
    model: str  # content hash (0x + 64 hex) of the model file in the hub
    model_format: str  # "torchscript" | "onnx"
    inputs: tuple[str, ...]  # content hashes, one per item, in item order
    batch_size: int
    tolerance_ppm: int  # allowed |a - b| <= tol * max(1, |b|), tol = ppm / 1e6; 0 = exact
    deadline: int  # unix seconds by which the result must be committed
    price_wei: int
    provider: str  # the provider the job is funded for

    def canonical(self) -> bytes:
        doc = {
            "version": 1,
            "model": self.model,
            "modelFormat": self.model_format,
            "inputs": list(self.inputs),
            "batchSize": self.batch_size,
            "tolerancePpm": self.tolerance_ppm,
            "deadline": self.deadline,
            "priceWei": str(self.price_wei),
            "provider": self.provider.lower(),
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @property
    def spec_hash(self) -> Hash32:
        return keccak256(self.canonical())

    @classmethod
    def parse(cls, raw: bytes | str) -> "JobSpec":
        """Parses and validates untrusted JSON (size-limited; every field checked)."""
        data = raw.encode() if isinstance(raw, str) else raw
        if len(data) > MAX_SPEC_BYTES:
            raise JobSpecError(f"spec is {len(data)} bytes; the limit is {MAX_SPEC_BYTES}")
        try:
            doc = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise JobSpecError(f"spec is not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise JobSpecError("spec must be a JSON object")
        if doc.get("version") != 1:
            raise JobSpecError(f"unsupported spec version {doc.get('version')!r}; expected 1")
        inputs = _field(doc, "inputs", list)
        if not 1 <= len(inputs) <= MAX_ITEMS:
            raise JobSpecError(f"inputs: {len(inputs)} items; allowed 1..{MAX_ITEMS}")
        spec = cls(
            model=_hash(doc, "model"),
            model_format=_choice(doc, "modelFormat", MODEL_FORMATS),
            inputs=tuple(_hash_value(f"inputs[{i}]", h) for i, h in enumerate(inputs)),
            batch_size=_int(doc, "batchSize", 1, 4096),
            tolerance_ppm=_int(doc, "tolerancePpm", 0, 1_000_000),
            deadline=_int(doc, "deadline", 1, 2**63 - 1),
            price_wei=_wei(doc, "priceWei"),
            provider=_address(doc, "provider"),
        )
        extra = set(doc) - {"version", "model", "modelFormat", "inputs", "batchSize", "tolerancePpm",
                            "deadline", "priceWei", "provider"}
        if extra:
            raise JobSpecError(f"unknown field(s): {sorted(extra)}")
        return spec


def encode_output(values: np.ndarray) -> bytes:
    """One item's output as canonical bytes: JSON header line + raw little-endian data."""
    dtype = np.dtype(values.dtype).name
    if dtype not in OUTPUT_DTYPES:
        raise JobSpecError(f"output dtype {dtype} is not one of {OUTPUT_DTYPES}")
    header = json.dumps({"dtype": dtype, "shape": list(values.shape)}, separators=(",", ":")).encode()
    return header + b"\n" + np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes()


def decode_output(data: bytes, what: str = "output") -> np.ndarray:
    """Inverse of encode_output, for untrusted bytes (size and shape checked); errors name the
    bytes as `what` ("output", "input")."""
    if len(data) > MAX_OUTPUT_BYTES:
        raise JobSpecError(f"{what} is {len(data)} bytes; the limit is {MAX_OUTPUT_BYTES}")
    header, sep, body = data.partition(b"\n")
    if not sep:
        raise JobSpecError(f"{what} has no header line")
    try:
        meta = json.loads(header)
        dtype = np.dtype(meta["dtype"]).newbyteorder("<")
        shape = tuple(int(d) for d in meta["shape"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError):
        # the parser's own words ("Expecting value: line 1 column 1") say less than this
        raise JobSpecError(f"{what}'s first line is not a JSON header naming dtype and shape") from None
    if meta["dtype"] not in OUTPUT_DTYPES or any(d < 0 for d in shape):
        raise JobSpecError(f"{what} header names dtype {meta['dtype']!r} and shape {shape}; dtypes: {OUTPUT_DTYPES}")
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if expected != len(body):
        raise JobSpecError(f"{what} body is {len(body)} bytes; dtype and shape need {expected}")
    return np.frombuffer(body, dtype=dtype).reshape(shape)


def output_digest(encoded: bytes) -> Hash32:
    """The Merkle leaf data of one item: keccak256 of its canonical output bytes."""
    return keccak256(encoded)


def within_tolerance(got: np.ndarray, want: np.ndarray, tolerance_ppm: int) -> bool:
    """Whether a re-executed output matches: same dtype and shape, |got - want| <= tol * max(1,
    |want|). The dtype too: the same model gives every party the same one, and a cheaper one (fp16
    bytes for an fp32 model's output) would otherwise pass within a tolerance of a few hundred ppm."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if tolerance_ppm == 0:
        return bool(np.array_equal(got, want))
    tol = tolerance_ppm / 1e6
    g, w = got.astype(np.float64), want.astype(np.float64)
    return bool(np.all(np.abs(g - w) <= tol * np.maximum(1.0, np.abs(w))))


def _field(doc: dict[str, Any], key: str, kind: type[T]) -> T:
    if key not in doc:
        raise JobSpecError(f"{key}: missing")
    value = doc[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise JobSpecError(f"{key}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _hash_value(name: str, value: Any) -> str:
    if not isinstance(value, str) or not _HASH.match(value):
        raise JobSpecError(f"{name}: expected 0x + 64 lower-case hex digits")
    return value


def _hash(doc: dict[str, Any], key: str) -> str:
    return _hash_value(key, _field(doc, key, str))


def _choice(doc: dict[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = _field(doc, key, str)
    if value not in allowed:
        raise JobSpecError(f"{key}: {value!r} is not one of {allowed}")
    return value


def _int(doc: dict[str, Any], key: str, low: int, high: int) -> int:
    value = _field(doc, key, int)
    if not low <= value <= high:
        raise JobSpecError(f"{key}: {value} is outside {low}..{high}")
    return value


def _wei(doc: dict[str, Any], key: str) -> int:
    value = _field(doc, key, str)
    if not value.isdigit() or len(value) > 78:
        raise JobSpecError(f"{key}: expected a decimal string of wei")
    amount = int(value)
    if amount <= 0:
        raise JobSpecError(f"{key}: must be positive")
    return amount


def _address(doc: dict[str, Any], key: str) -> str:
    value = _field(doc, key, str)
    if not _ADDRESS.match(value):
        raise JobSpecError(f"{key}: expected a 0x-prefixed 20-byte hex address")
    return value.lower()
