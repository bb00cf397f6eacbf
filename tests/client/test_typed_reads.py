"""Guard: no contract's struct or multi-value return is read by position anywhere in the project.

A struct field read as `job[3]` reads the wrong value without an error once the Solidity struct
gains or moves a field; read by name (`job.provider` from client.contracts' views, `job["price"]`
from brownie) it stays right or fails loudly. The functions guarded are taken from the ABIs in
protocol/artifacts: every view whose output is a struct or more than one value. The scan flags,
in every Python file of the project, an integer subscript of such a call's result (`.call()[3]`,
brownie's `c.jobState(1)[3]`), of a name bound from one in the same scope, and unpacking one into a
tuple (`a, b = c.unbondingOf(x)`, as positional as `[0]`), and a string key on a web3 result
(`job["price"]`: web3's named tuples have none; brownie's values do). Array returns (`challengeIndices`)
are not guarded: their positions are their meaning.
"""

from __future__ import annotations

import ast
import gc
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("backend", "client", "devtools", "protocol", "provider_agent", "renter", "scripts", "tests", "unchained_cli",
           "verifier")


def structured_views() -> frozenset[str]:
    """Names of contract functions returning a struct or several named values, from the ABIs.

    Several unnamed values (the test harness's `chunkPosition`) have no names to read them by.
    """
    found = set()
    for path in (REPO / "protocol" / "artifacts").glob("*.json"):
        for item in json.loads(path.read_text()).get("abi", []):
            outputs = item.get("outputs", [])
            if item.get("type") == "function" and (
                    any(o["type"].startswith("tuple") for o in outputs)
                    or len(outputs) > 1 and all(o["name"] for o in outputs)):
                found.add(item["name"])
    return frozenset(found)


def _read_kind(node: ast.AST, views: frozenset[str]) -> str | None:
    """"web3" for `x.functions.view(...).call(...)`, "brownie" for `x.view(...)` of a guarded
    view, else None."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    if node.func.attr == "call" and isinstance(node.func.value, ast.Call):
        return "web3" if _read_kind(node.func.value, views) else None
    return "brownie" if node.func.attr in views else None


def _is_read(node: ast.AST, views: frozenset[str]) -> bool:
    return _read_kind(node, views) is not None


def _str_index(node: ast.Subscript) -> bool:
    return isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)


def _int_index(node: ast.Subscript) -> bool:
    index = node.slice
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        index = index.operand
    return isinstance(index, ast.Constant) and type(index.value) is int


def _parse(source: str, filename: str) -> ast.Module:
    """ast.parse with the garbage collector held off: a collection inside the parser can run a
    finalizer that logs a traceback (a Celery result left by an earlier test, its Redis gone), and
    Python 3.11 formats tracebacks with the parser; that nested parse breaks the outer one
    ("SystemError: AST constructor recursion depth mismatch", seen in CI)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename)
    finally:
        if collecting:
            gc.enable()


def positional_reads(source: str, views: frozenset[str], filename: str = "<source>") -> list[str]:
    """`file:line: code` for every positional read of a guarded view's result in `source`."""
    tree = _parse(source, filename)
    found = []
    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                   ast.Lambda))]
    for scope in scopes:
        # Only this scope's own statements: nested functions are scopes of their own.
        own = []
        stack = list(ast.iter_child_nodes(scope))
        while stack:
            node = stack.pop()
            own.append(node)
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                stack.extend(ast.iter_child_nodes(node))
        bound: dict[str, str] = {}  # name -> the kind of read it was bound from
        for node in own:
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None \
                    and (kind := _read_kind(node.value, views)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        bound[target.id] = kind
                    elif isinstance(target, (ast.Tuple, ast.List)):
                        found.append(node)
        for node in own:
            if not isinstance(node, ast.Subscript):
                continue
            kind = _read_kind(node.value, views) or (
                bound.get(node.value.id) if isinstance(node.value, ast.Name) else None)
            # web3's named tuples have no string keys: `job["price"]` raises where brownie's works.
            if kind and (_int_index(node) or kind == "web3" and _str_index(node)):
                found.append(node)
    lines = source.splitlines()
    return sorted({f"{filename}:{n.lineno}: {lines[n.lineno - 1].strip()}" for n in found})


def project_files() -> list[Path]:
    return sorted(p for top in SCANNED for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts)


def test_no_struct_or_multi_value_return_is_read_by_position():
    views = structured_views()
    assert {"jobState", "challenge", "round", "getLease", "dispute", "providerOf", "unbondingOf"} <= views
    found = [hit for path in project_files()
             for hit in positional_reads(path.read_text(), views, str(path.relative_to(REPO)))]
    assert not found, "read these by field name instead:\n" + "\n".join(found)


def test_the_guard_catches_a_reintroduced_positional_read():
    views = structured_views()
    web3_read = "def f(escrow):\n    job = escrow.functions.jobState(1).call()\n    return job[3]\n"
    assert positional_reads(web3_read, views) == ["<source>:3: return job[3]"]
    assert positional_reads("x = escrow.functions.jobState(1).call()[3]\n", views)
    assert positional_reads("x = challenge_manager.challenge(cid)[-1]\n", views)  # brownie
    assert positional_reads("amount, release_at = staking.functions.unbondingOf(a).call()\n", views)
    # web3's named tuple read by string key: a TypeError at run time
    assert positional_reads("job = escrow.functions.jobState(1).call()\nx = job['status']\n", views)
    assert positional_reads("x = escrow.functions.jobState(1).call()['status']\n", views)


def test_the_guard_leaves_names_arrays_and_other_scopes_alone():
    views = structured_views()
    fine = (
        "def f(escrow, manager, cid):\n"
        "    job = escrow.functions.jobState(1).call()\n"
        "    indices = manager.functions.challengeIndices(cid).call()\n"
        "    lease = manager.getLease(1)\n"  # brownie's return values have string keys
        "    return job.provider, lease['renter'], indices[0]\n"
        "def g(job):\n"
        "    return job[3]\n"  # another scope's `job`: not bound from a read here
    )
    assert positional_reads(fine, views) == []


def test_contract_objects_are_made_only_by_client_contracts():
    """`web3.eth.contract(...)` anywhere else would give plain tuples back, readable only by position."""
    def makes_contracts(path: Path) -> list[int]:
        return [n.lineno for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute) and n.func.attr == "contract"
                and isinstance(n.func.value, ast.Attribute) and n.func.value.attr == "eth"]

    found = {str(p.relative_to(REPO)): lines for p in project_files() if (lines := makes_contracts(p))}
    assert set(found) == {"client/contracts.py"}, found
