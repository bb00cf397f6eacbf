"""The dashboard's keccak comes from @noble/hashes and its zip from fflate, vendored into the
package (backend/api/static/noble-hashes, fflate): the files served are the pinned npm releases',
every module the page imports is served, and they hash and zip as Python does (under Node here;
in the page itself with Chromium: test_backend_dashboard.py)."""

from __future__ import annotations

import json
import posixpath
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.settings import Settings
from protocol.merkle import keccak256

REPO = Path(__file__).resolve().parents[2]
VENDORED = REPO / "backend" / "api" / "static" / "noble-hashes"
INSTALLED = REPO / "node_modules" / "@noble" / "hashes"
FFLATE = REPO / "backend" / "api" / "static" / "fflate"
FFLATE_INSTALLED = REPO / "node_modules" / "fflate"


def test_vendored_modules_are_the_pinned_release_unchanged() -> None:
    if not INSTALLED.is_dir():
        pytest.skip("node_modules not installed (scripts/setup.sh)")
    version = json.loads((INSTALLED / "package.json").read_text())["version"]
    pinned = json.loads((REPO / "package.json").read_text())["devDependencies"]["@noble/hashes"]
    assert version == pinned and f"@noble/hashes {version}" in (VENDORED / "README.md").read_text()
    modules = sorted(p.name for p in VENDORED.glob("*.js"))
    assert modules == ["_assert.js", "_u64.js", "cryptoBrowser.js", "sha3.js", "utils.js"]
    for name in modules:
        assert (VENDORED / name).read_bytes() == (INSTALLED / "esm" / name).read_bytes(), name
    assert (VENDORED / "LICENSE").read_bytes() == (INSTALLED / "LICENSE").read_bytes()


def test_vendored_fflate_is_the_pinned_release_unchanged() -> None:
    if not FFLATE_INSTALLED.is_dir():
        pytest.skip("node_modules not installed (scripts/setup.sh)")
    version = json.loads((FFLATE_INSTALLED / "package.json").read_text())["version"]
    pinned = json.loads((REPO / "package.json").read_text())["devDependencies"]["fflate"]
    assert version == pinned and f"fflate {version}" in (FFLATE / "README.md").read_text()
    assert sorted(p.name for p in FFLATE.glob("*.js")) == ["browser.js"]
    assert (FFLATE / "browser.js").read_bytes() == (FFLATE_INSTALLED / "esm" / "browser.js").read_bytes()
    assert (FFLATE / "LICENSE").read_bytes() == (FFLATE_INSTALLED / "LICENSE").read_bytes()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path, rpc_url="http://127.0.0.1:9", dispatch=False, run_indexer=False,
                        public_url="http://testserver")
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_every_module_the_page_imports_is_served_and_nothing_else(client: TestClient) -> None:
    page = client.get("/").text
    imports = json.loads(re.search(r'<script type="importmap">(.*?)</script>', page).group(1))["imports"]  # type: ignore[union-attr]
    modules = re.findall(r'<script type="module" src="([^"]+)"', page)
    assert modules == ["/static/keccak.js", "/static/zip.js"]
    wanted, todo = set(), list(modules)
    while todo:  # each module, and what it imports: a path, or a bare name the import map resolves
        path = todo.pop()
        served = client.get(path)
        assert served.status_code == 200 and served.headers["content-type"].startswith("text/javascript"), path
        wanted.add(path)
        for name in re.findall(r"""from ["']([^"']+)["']""", served.text):
            target = imports[name] if name in imports else posixpath.normpath(posixpath.join(posixpath.dirname(path), name))
            if target not in wanted:
                todo.append(target)
    assert wanted == {"/static/keccak.js", "/static/zip.js", "/static/fflate/browser.js", *(
        f"/static/noble-hashes/{m}" for m in ("sha3.js", "_assert.js", "_u64.js", "utils.js", "cryptoBrowser.js"))}
    for outside in ("..%2Fkeccak.js", "README.md", "LICENSE", "sha3.js.map", "..%2F..%2Fapp.py"):
        for package in ("noble-hashes", "fflate"):
            assert client.get(f"/static/{package}/{outside}").status_code in (404, 422), outside
    assert client.get("/static/node_modules/browser.js").status_code in (404, 422)


def test_the_vendored_keccak_hashes_as_protocol_does() -> None:
    node = shutil.which("node")
    if node is None or not INSTALLED.is_dir():  # the bare '@noble/hashes/crypto' import resolves there
        pytest.skip("node and node_modules not installed (scripts/setup.sh)")
    inputs = [bytes((i * 7 + 3) & 255 for i in range(size)) for size in (0, 1, 135, 136, 137, 1000)]
    script = (f"import {{ keccak_256 }} from {json.dumps((VENDORED / 'sha3.js').as_uri())};\n"
              "const inputs = JSON.parse(process.argv[1]);\n"
              "console.log(JSON.stringify(inputs.map((d) => Buffer.from(keccak_256(Uint8Array.from(d))).toString('hex'))));")
    done = subprocess.run([node, "--input-type=module", "-e", script, json.dumps([list(d) for d in inputs])],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [keccak256(d).hex() for d in inputs]
