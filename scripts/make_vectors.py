"""Write the golden vectors shared by the Python and Solidity sides (tests/vectors/*.json).

Merkle vectors come from pymerkle itself (the reference), not from protocol.merkle, so that
both implementations are checked against the library whose layout PROTOCOL.md names.
PoG vectors come from protocol.pog; their roots are re-derived with pymerkle before writing.
Run from the repository root: python scripts/make_vectors.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pymerkle import InmemoryTree

from protocol.merkle import keccak256
from protocol.pog.challenge import challenge_indices
from protocol.pog.commitment import chunk_position, commit, encode, leaf_count
from protocol.pog.workload import (
    MATRIX_A,
    MATRIX_B,
    WorkloadKeys,
    element,
    gpu_seed,
    reference_product,
    word,
)

VECTORS = Path(__file__).resolve().parent.parent / "tests" / "vectors"
MERKLE_SIZES = [*range(1, 18), 100, 1000]


def hx(data: bytes) -> str:
    return "0x" + bytes(data).hex()


def tag(*parts: object) -> bytes:
    """Deterministic 32-byte test values, so regenerating gives the same files."""
    return keccak256("/".join(str(p) for p in ("unchained-vectors", *parts)).encode())


def pymerkle_tree(leaves: list[bytes]) -> InmemoryTree:
    tree = InmemoryTree(algorithm="keccak_256")
    for data in leaves:
        tree.append_entry(data)
    return tree


def merkle_case(size: int) -> dict[str, Any]:
    leaves = [tag("merkle", size, i) for i in range(size)]
    tree = pymerkle_tree(leaves)
    if size <= 17:
        indices = list(range(size))
    else:
        indices = sorted({0, 1, size // 2, size - 2, size - 1}
                         | {int.from_bytes(tag("idx", size, t), "big") % size for t in range(5)})
    proofs = []
    for index in indices:
        proof = tree.prove_inclusion(index + 1)
        proofs.append({"index": index, "leaf_hash": hx(proof.path[0]),
                       "siblings": [hx(s) for s in proof.path[1:]]})
    return {"leaves": [hx(d) for d in leaves], "root": hx(tree.get_root()), "proofs": proofs}


def pog_keys_case(n: int, g: int) -> tuple[dict[str, Any], WorkloadKeys]:
    round_seed = tag("round", n)
    uuid_hash = keccak256(f"GPU-vector-{n}-{g}".encode())
    seed = gpu_seed(round_seed, g, uuid_hash)
    keys = WorkloadKeys.derive(seed)
    words_per_matrix = n * n // 8
    counters = [0, 1, n // 8 - 1, n // 8, words_per_matrix - 1,
                int.from_bytes(tag("word", n), "big") % words_per_matrix]
    case: dict[str, Any] = {
        "round_seed": hx(round_seed), "gpu_index": g, "uuid_hash": hx(uuid_hash),
        "gpu_seed": hx(seed), "n": n,
        "keys": {"a": [keys.a.k1, keys.a.k2], "b": [keys.b.k1, keys.b.k2]},
        "words": [{"matrix": m, "w": w, "value": word(k, w)}
                  for m, k in ((MATRIX_A, keys.a), (MATRIX_B, keys.b)) for w in counters],
    }
    cells = [(0, 0), (0, n - 1), (n - 1, 0), (n - 1, n - 1), (1, 2), (n // 2, n // 3)]
    cells += [(int.from_bytes(tag("cell", n, t, "i"), "big") % n,
               int.from_bytes(tag("cell", n, t, "j"), "big") % n) for t in range(6)]
    case["elements"] = [{"i": i, "j": j, "value": element(keys, n, i, j)} for i, j in cells]
    return case, keys


def pog_case(n: int, g: int, full: bool) -> dict[str, Any]:
    case, keys = pog_keys_case(n, g)
    if not full:
        return case
    product = reference_product(keys, n)
    for cell in case["elements"]:
        assert product[cell["i"], cell["j"]] == cell["value"]
    tree = commit(product)
    count = leaf_count(n)
    data = encode(product)
    reference = pymerkle_tree([data[c * 256 : c * 256 + 256] for c in range(count)])
    assert reference.get_root() == tree.root
    chunks = []
    for c in sorted({0, 1, n // 64, count // 2 + 3, count - 1}):
        row, col = chunk_position(n, c)
        chunks.append({"index": c, "data": hx(encode(product[row, col : col + 64])),
                       "siblings": [hx(s) for s in tree.proof(c)]})
    randomness = tag("randomness", n)
    case.update(
        leaf_count=count, root=hx(tree.root), chunks=chunks,
        challenge={"randomness": hx(randomness), "k": 32,
                   "indices": challenge_indices(randomness, tree.root, count, 32)},
    )
    return case


def main() -> None:
    VECTORS.mkdir(parents=True, exist_ok=True)
    merkle = {"cases": [merkle_case(size) for size in MERKLE_SIZES]}
    pog = {"cases": [pog_case(64, 0, True), pog_case(128, 3, True), pog_case(4096, 1, False)]}
    for name, content in (("merkle.json", merkle), ("pog.json", pog)):
        (VECTORS / name).write_text(json.dumps(content, indent=1) + "\n")
        print(f"wrote {VECTORS / name}")


if __name__ == "__main__":
    main()
