"""PoG wire messages between prover and verifier: JSON with hard size limits, never pickle.

Everything another party sends is parsed here, strictly: the byte size is checked before
`json.loads`, every field is typed and length-checked, and anything unexpected raises
`MalformedMessage` or `MessageTooLarge` (DESIGN.md requirement 9).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar

from protocol.errors import ProtocolError
from protocol.merkle import MAX_PROOF_DEPTH
from protocol.pog.commitment import CHUNK_BYTES, leaf_count
from protocol.pog.identity import (
    EVIDENCE_JSON_BYTES,
    IDENTITY_JSON_BYTES,
    AttestationEvidence,
    DeviceIdentity,
    evidence_from_json,
    evidence_to_json,
    identity_from_json,
    identity_to_json,
)
from protocol.pog.residency import BLOCK_BYTES, PARENTS, BlockOpening, FillParams, ProbeAnswer
from protocol.pog.workload import check_n

MAX_GPUS = 64
MAX_ANSWERS_PER_GPU = 1024
_HASH_HEX = 2 + 64
# One answer: index, 256 data bytes, up to MAX_PROOF_DEPTH siblings, with JSON punctuation.
_ANSWER_BYTES = 64 + (2 + 2 * CHUNK_BYTES) + MAX_PROOF_DEPTH * (_HASH_HEX + 4)
# One opened fill block: index, 32 bytes, up to MAX_PROOF_DEPTH siblings; a probe opens the
# block and its PARENTS parents.
_OPENING_BYTES = 64 + _HASH_HEX + MAX_PROOF_DEPTH * (_HASH_HEX + 4)
_PROBE_BYTES = 32 + (1 + PARENTS) * _OPENING_BYTES

T = TypeVar("T")


class MalformedMessage(ProtocolError):
    """A message is not the JSON shape PROTOCOL.md's PoG exchange expects."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"malformed {what}: {reason}")
        self.what = what
        self.reason = reason


class MessageTooLarge(ProtocolError):
    """A message exceeds its size limit; it is refused before parsing."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"message of {size} bytes exceeds the limit of {limit}")
        self.size = size
        self.limit = limit


@dataclass(frozen=True)
class GpuCommitment:
    """A prover's root for one GPU: posted before any challenge index can be derived."""

    gpu_index: int
    uuid_hash: bytes
    n: int
    root: bytes

    @property
    def leaf_count(self) -> int:
        return leaf_count(self.n)


@dataclass(frozen=True)
class RoundCommitment:
    round_seed: bytes
    gpus: tuple[GpuCommitment, ...]


@dataclass(frozen=True)
class ChunkAnswer:
    """A revealed chunk: its index, its 256 bytes and its inclusion proof."""

    index: int
    data: bytes
    siblings: tuple[bytes, ...]


@dataclass(frozen=True)
class GpuAnswers:
    """A GPU's revealed chunks, with what NVML says the device is and, from a GPU in
    confidential-computing mode, its attestation evidence for the round's seed (both optional:
    a CPU has neither; sent with the answers, after the timed seed-to-root)."""

    gpu_index: int
    answers: tuple[ChunkAnswer, ...]
    identity: DeviceIdentity | None = None
    evidence: AttestationEvidence | None = None


@dataclass(frozen=True)
class RoundAnswers:
    round_seed: bytes
    gpus: tuple[GpuAnswers, ...]


@dataclass(frozen=True)
class FillRoot:
    """A device's residency fill root, with the shape it was built to (the verifier's)."""

    gpu_index: int
    lanes: int
    steps: int
    iterations: int
    root: bytes

    @property
    def params(self) -> FillParams:
        return FillParams(self.lanes, self.steps, self.iterations)


@dataclass(frozen=True)
class RoundFills:
    round_seed: bytes
    gpus: tuple[FillRoot, ...]


@dataclass(frozen=True)
class GpuProbes:
    gpu_index: int
    probes: tuple[ProbeAnswer, ...]


@dataclass(frozen=True)
class RoundProbes:
    round_seed: bytes
    gpus: tuple[GpuProbes, ...]


def max_answers_bytes(gpu_count: int, k: int) -> int:
    """Size limit for an answers message of `gpu_count` GPUs with k chunks each."""
    return 256 + gpu_count * (64 + k * _ANSWER_BYTES + IDENTITY_JSON_BYTES + EVIDENCE_JSON_BYTES)


def max_commitment_bytes(gpu_count: int) -> int:
    return 256 + gpu_count * 320


def max_probes_bytes(gpu_count: int, q: int) -> int:
    """Size limit for a probe answers message of `gpu_count` devices with q probes each."""
    return 256 + gpu_count * (64 + q * _PROBE_BYTES)


def _hex(value: bytes) -> str:
    return "0x" + bytes(value).hex()


def encode_commitment(commitment: RoundCommitment) -> bytes:
    return json.dumps({
        "round_seed": _hex(commitment.round_seed),
        "gpus": [{"gpu_index": g.gpu_index, "uuid_hash": _hex(g.uuid_hash), "n": g.n,
                  "root": _hex(g.root)} for g in commitment.gpus],
    }, separators=(",", ":")).encode()


def _gpu_answers_json(g: GpuAnswers) -> dict[str, Any]:
    item: dict[str, Any] = {"gpu_index": g.gpu_index,
                            "answers": [{"index": a.index, "data": _hex(a.data),
                                         "siblings": [_hex(s) for s in a.siblings]} for a in g.answers]}
    if g.identity is not None:
        item["identity"] = identity_to_json(g.identity)
    if g.evidence is not None:
        item["evidence"] = evidence_to_json(g.evidence)
    return item


def encode_answers(answers: RoundAnswers) -> bytes:
    return json.dumps({"round_seed": _hex(answers.round_seed),
                       "gpus": [_gpu_answers_json(g) for g in answers.gpus]},
                      separators=(",", ":")).encode()


def encode_fills(fills: RoundFills) -> bytes:
    return json.dumps({
        "round_seed": _hex(fills.round_seed),
        "gpus": [{"gpu_index": f.gpu_index, "lanes": f.lanes, "steps": f.steps,
                  "iterations": f.iterations, "root": _hex(f.root)} for f in fills.gpus],
    }, separators=(",", ":")).encode()


def _opening(o: BlockOpening) -> dict[str, Any]:
    return {"index": o.index, "block": _hex(o.block), "siblings": [_hex(s) for s in o.siblings]}


def encode_probes(probes: RoundProbes) -> bytes:
    return json.dumps({
        "round_seed": _hex(probes.round_seed),
        "gpus": [{"gpu_index": g.gpu_index,
                  "probes": [{**_opening(p.opening), "parents": [_opening(o) for o in p.parents]}
                             for p in g.probes]}
                 for g in probes.gpus],
    }, separators=(",", ":")).encode()


def _load(raw: bytes, limit: int, what: str) -> dict[str, Any]:
    if not isinstance(raw, (bytes, bytearray)):
        raise MalformedMessage(what, "expected bytes")
    if len(raw) > limit:
        raise MessageTooLarge(len(raw), limit)
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as err:
        raise MalformedMessage(what, f"not JSON ({err})") from err
    if not isinstance(value, dict):
        raise MalformedMessage(what, "top level is not an object")
    return value


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not allowed")


def _field(obj: Any, key: str, kind: type[T], what: str) -> T:
    if not isinstance(obj, dict) or key not in obj:
        raise MalformedMessage(what, f"missing {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise MalformedMessage(what, f"{key!r} is not {kind.__name__}")
    return value


def _bytes(obj: Any, key: str, size: int, what: str) -> bytes:
    text = _field(obj, key, str, what)
    if len(text) != 2 + 2 * size or not text.startswith("0x"):
        raise MalformedMessage(what, f"{key!r} is not 0x and {size} hex bytes")
    try:
        return bytes.fromhex(text[2:])
    except ValueError as err:
        raise MalformedMessage(what, f"{key!r} is not hex") from err


def _list(obj: Any, key: str, limit: int, what: str) -> list[Any]:
    value = _field(obj, key, list, what)
    if len(value) > limit:
        raise MalformedMessage(what, f"{key!r} has {len(value)} items, limit {limit}")
    return value


def _uint(obj: Any, key: str, what: str) -> int:
    value = _field(obj, key, int, what)
    if not 0 <= value < 2**256:
        raise MalformedMessage(what, f"{key!r} is not a uint256")
    return value


def decode_commitment(raw: bytes, gpu_count: int) -> RoundCommitment:
    """Parse a commitment for a round of `gpu_count` GPUs (size-limited before parsing)."""
    what = "commitment"
    obj = _load(raw, max_commitment_bytes(gpu_count), what)
    gpus = []
    for item in _list(obj, "gpus", min(gpu_count, MAX_GPUS), what):
        n = _uint(item, "n", what)
        try:
            check_n(n)
        except ProtocolError as err:
            raise MalformedMessage(what, str(err)) from err
        gpus.append(GpuCommitment(_uint(item, "gpu_index", what),
                                  _bytes(item, "uuid_hash", 32, what), n,
                                  _bytes(item, "root", 32, what)))
    return RoundCommitment(_bytes(obj, "round_seed", 32, what), tuple(gpus))


def decode_answers(raw: bytes, gpu_count: int, k: int) -> RoundAnswers:
    """Parse answers for `gpu_count` GPUs with k chunks each (size-limited before parsing)."""
    what = "answers"
    obj = _load(raw, max_answers_bytes(gpu_count, k), what)
    gpus = []
    for item in _list(obj, "gpus", min(gpu_count, MAX_GPUS), what):
        answers = []
        for answer in _list(item, "answers", min(k, MAX_ANSWERS_PER_GPU), what):
            siblings = tuple(_bytes({"s": s}, "s", 32, what)
                             for s in _list(answer, "siblings", MAX_PROOF_DEPTH, what))
            answers.append(ChunkAnswer(_uint(answer, "index", what),
                                       _bytes(answer, "data", CHUNK_BYTES, what), siblings))
        try:
            identity = identity_from_json(item["identity"]) if "identity" in item else None
            evidence = evidence_from_json(item["evidence"]) if "evidence" in item else None
        except ProtocolError as err:
            raise MalformedMessage(what, str(err)) from err
        gpus.append(GpuAnswers(_uint(item, "gpu_index", what), tuple(answers), identity, evidence))
    return RoundAnswers(_bytes(obj, "round_seed", 32, what), tuple(gpus))


def decode_fills(raw: bytes, gpu_count: int) -> RoundFills:
    """Parse the fill roots of a round of `gpu_count` devices (size-limited before parsing)."""
    what = "fill roots"
    obj = _load(raw, max_commitment_bytes(gpu_count), what)
    gpus = []
    for item in _list(obj, "gpus", min(gpu_count, MAX_GPUS), what):
        fill = FillRoot(_uint(item, "gpu_index", what), _uint(item, "lanes", what),
                        _uint(item, "steps", what), _uint(item, "iterations", what),
                        _bytes(item, "root", 32, what))
        try:
            fill.params  # noqa: B018  shape checks (powers of two, sizes) raise here
        except ProtocolError as err:
            raise MalformedMessage(what, str(err)) from err
        gpus.append(fill)
    return RoundFills(_bytes(obj, "round_seed", 32, what), tuple(gpus))


def _decode_opening(obj: Any, what: str) -> BlockOpening:
    siblings = tuple(_bytes({"s": s}, "s", 32, what)
                     for s in _list(obj, "siblings", MAX_PROOF_DEPTH, what))
    return BlockOpening(_uint(obj, "index", what), _bytes(obj, "block", BLOCK_BYTES, what),
                        siblings)


def decode_probes(raw: bytes, gpu_count: int, q: int) -> RoundProbes:
    """Parse probe answers for `gpu_count` devices with q probes each (size-limited first)."""
    what = "probe answers"
    obj = _load(raw, max_probes_bytes(gpu_count, q), what)
    gpus = []
    for item in _list(obj, "gpus", min(gpu_count, MAX_GPUS), what):
        probes = []
        for probe in _list(item, "probes", min(q, MAX_ANSWERS_PER_GPU), what):
            parents = tuple(_decode_opening(p, what)
                            for p in _list(probe, "parents", PARENTS, what))
            probes.append(ProbeAnswer(_decode_opening(probe, what), parents))
        gpus.append(GpuProbes(_uint(item, "gpu_index", what), tuple(probes)))
    return RoundProbes(_bytes(obj, "round_seed", 32, what), tuple(gpus))
