"""Exceptions of the protocol package: one root, narrow subclasses that carry their facts.

Verification raises instead of returning False, so a caller cannot ignore a failed check and a
verdict can say exactly what was wrong (which leaf, which element, what was expected).
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Root of every error raised by `protocol`."""


class InvalidParameter(ProtocolError):
    """A protocol parameter is outside what PROTOCOL.md allows (n, k, sizes, lengths)."""

    def __init__(self, name: str, value: object, reason: str) -> None:
        super().__init__(f"invalid {name}={value!r}: {reason}")
        self.name = name
        self.value = value
        self.reason = reason


class InvalidProof(ProtocolError):
    """A Merkle inclusion proof does not lead from the leaf at `index` to the committed root."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"invalid inclusion proof for leaf {index}: {reason}")
        self.index = index
        self.reason = reason


class IndexOutOfRange(ProtocolError):
    """A leaf index is not below the tree's leaf count."""

    def __init__(self, index: int, leaf_count: int) -> None:
        super().__init__(f"leaf index {index} out of range for {leaf_count} leaves")
        self.index = index
        self.leaf_count = leaf_count


class WrongSize(ProtocolError):
    """A value has the wrong size: chunk bytes, n, leaf count, number of answers."""

    def __init__(self, what: str, expected: int, got: int) -> None:
        super().__init__(f"wrong size of {what}: expected {expected}, got {got}")
        self.what = what
        self.expected = expected
        self.got = got


class WrongElement(ProtocolError):
    """Element `offset` of chunk `index` is not the exact value of C = A·B for the seed."""

    def __init__(self, index: int, offset: int, expected: int, got: int) -> None:
        super().__init__(
            f"chunk {index} element {offset}: expected {expected}, got {got}"
        )
        self.index = index
        self.offset = offset
        self.expected = expected
        self.got = got


class ClassRejected(ProtocolError):
    """A measured throughput does not fit the claimed GPU class within its tolerance."""

    def __init__(self, name: str, measured_tflops: float, dtype: str, reason: str) -> None:
        super().__init__(
            f"{name!r} at {measured_tflops:.3f} TFLOPS ({dtype}) rejected: {reason}"
        )
        self.name = name
        self.measured_tflops = measured_tflops
        self.dtype = dtype
        self.reason = reason


class WrongBlock(ProtocolError):
    """A revealed block of a residency fill is not what the fill's rule makes of its parents
    (or of its lane's seed), or a parent is not the block at the index the rule names."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"fill block {index}: {reason}")
        self.index = index
        self.reason = reason
