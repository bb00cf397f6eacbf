"""The committed golden vectors are exactly what scripts/make_vectors.py produces now, so a
change of format cannot slip past the Solidity side unnoticed."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_script():
    spec = importlib.util.spec_from_file_location("make_vectors", ROOT / "scripts/make_vectors.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_vectors_equal_regenerated_ones():
    script = load_script()
    merkle = json.loads((ROOT / "tests/vectors/merkle.json").read_text())
    pog = json.loads((ROOT / "tests/vectors/pog.json").read_text())
    assert merkle == {"cases": [script.merkle_case(s) for s in script.MERKLE_SIZES]}
    assert pog == {"cases": [script.pog_case(64, 0, True), script.pog_case(128, 3, True),
                             script.pog_case(4096, 1, False)]}
