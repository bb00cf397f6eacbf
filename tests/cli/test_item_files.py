"""The item file format as the README documents it: a file written by its recipe is accepted,
and a file in another format (random bytes, a .npy, text) is refused in one line that names the
item, its file and the format expected (not the decoder's internals)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest

from protocol.jobs import decode_output, encode_output
from renter.errors import RenterError
from renter.orders import check_inputs

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readmes_recipe_writes_what_job_submit_accepts() -> None:
    section = README.read_text().split("## Item files", 1)[1].split("\n## ", 1)[0]
    recipe = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    written: dict[str, bytes] = {}

    class Capture(io.BytesIO):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def close(self) -> None:
            written[self.name] = self.getvalue()
            super().close()

    exec(recipe, {"open": lambda name, mode: Capture(name)})  # noqa: S102 - our own README
    [(name, data)] = written.items()
    assert name == "inputs/000.item" and data.startswith(b'{"dtype":"float32","shape":[8]}\n')
    assert check_inputs([data], 8) == {((8,), "float32"): [0]}
    assert decode_output(data).tolist() == list(range(8))


@pytest.mark.parametrize("junk", [
    np.random.default_rng(7).bytes(4096),  # random bytes, newlines among them
    b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }\n" + bytes(32),
    b"a text file,\nnot an item\n",
])
def test_a_file_in_another_format_is_refused_in_one_line_naming_the_format(junk: bytes) -> None:
    good = encode_output(np.zeros(8, np.float32))
    with pytest.raises(RenterError) as refused:
        check_inputs([good, junk], 8, ["000.item", "001.bin"])
    said = str(refused.value)
    assert "\n" not in said and said.startswith("input item 1 (001.bin) is not an item file: the file"), said
    assert '{"dtype":"float32","shape":[3,224,224]}' in said and '"Item files"' in said
    assert "encode_output" not in said and "Expecting value" not in said and "codec" not in said


def test_a_header_with_the_wrong_body_says_how_many_bytes() -> None:
    short = encode_output(np.zeros(8, np.float32))[:-4]
    with pytest.raises(RenterError, match=r"the file body is 28 bytes; dtype and shape need 32"):
        check_inputs([short], 8)
