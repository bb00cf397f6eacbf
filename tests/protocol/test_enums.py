"""protocol.enums against the Solidity sources and the ABIs: one list per contract enum, in order.

An ABI carries an enum as a bare uint8, so nothing at run time notices a Solidity enum whose
members were reordered; this test does: it parses every `enum X { ... }` under contracts/ and
compares it, name by name and position by position, with the IntEnum of protocol.enums.
"""

from __future__ import annotations

import json
import re
from enum import IntEnum
from pathlib import Path

import pytest

from protocol.enums import SOLIDITY_ENUMS, ChallengeStatus, JobStatus

REPO = Path(__file__).resolve().parents[2]
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_UNIT = re.compile(r"\b(?:abstract\s+)?(?:contract|interface|library)\s+(\w+)")
_ENUM = re.compile(r"\benum\s+(\w+)\s*\{([^}]*)\}")


def solidity_enums(source: str) -> dict[str, list[str]]:
    """`Unit.Enum` -> member names in declaration order, for every enum in a Solidity source."""
    source = _COMMENT.sub("", source)
    found = {}
    for match in _ENUM.finditer(source):
        units = _UNIT.findall(source, 0, match.start())
        qualified = f"{units[-1]}.{match.group(1)}" if units else match.group(1)
        found[qualified] = [m.strip() for m in match.group(2).split(",") if m.strip()]
    return found


def python_names(members: list[str]) -> list[str]:
    """Solidity's `ProviderFaulted` is Python's PROVIDER_FAULTED."""
    return [re.sub(r"(?<!^)(?=[A-Z])", "_", m).upper() for m in members]


def mismatches(declared: dict[str, list[str]], ours: dict[str, type[IntEnum]]) -> list[str]:
    problems = [f"{name}: declared in Solidity, missing from protocol.enums" for name in declared.keys() - ours.keys()]
    problems += [f"{name}: in protocol.enums, declared nowhere in contracts/" for name in ours.keys() - declared.keys()]
    for name in declared.keys() & ours.keys():
        expected = list(enumerate(python_names(declared[name])))
        have = [(int(m), m.name) for m in ours[name]]
        if have != expected:
            problems.append(f"{name}: Solidity has {expected}, protocol.enums has {have}")
    return problems


def all_declared() -> dict[str, list[str]]:
    declared: dict[str, list[str]] = {}
    for path in sorted((REPO / "contracts").rglob("*.sol")):
        for name, members in solidity_enums(path.read_text()).items():
            assert declared.setdefault(name, members) == members, f"{name} declared twice, differently"
    return declared


def test_every_contract_enum_has_one_python_list_in_the_same_order():
    declared = all_declared()
    assert "IChallengeManager.Status" in declared and "IJobEscrow.JobStatus" in declared  # the parser works
    assert mismatches(declared, SOLIDITY_ENUMS) == []


def test_every_enum_in_the_abis_is_one_of_ours():
    """The ABIs name the enum of each uint8 in `internalType`: none may be unknown here."""
    def enum_types(node):
        if isinstance(node, dict):
            kind = node.get("internalType", "")
            if kind.startswith("enum "):
                yield kind.removeprefix("enum ")
            for value in node.values():
                yield from enum_types(value)
        elif isinstance(node, list):
            for value in node:
                yield from enum_types(value)

    used = {t for path in (REPO / "protocol" / "artifacts").glob("*.json")
            for t in enum_types(json.loads(path.read_text()).get("abi", []))}
    assert used and used <= SOLIDITY_ENUMS.keys(), used - SOLIDITY_ENUMS.keys()


@pytest.mark.parametrize("edit", [
    ("None,\n        Open,", "Open,\n        None,"),  # two members swapped
    ("Escalated,", "Escalated,\n        Reopened,"),  # a member inserted in the middle
    ("Dismissed", "Dropped"),  # a member renamed
])
def test_a_reordered_inserted_or_renamed_solidity_member_fails(edit):
    path = REPO / "contracts" / "interfaces" / "IChallengeManager.sol"
    source = path.read_text()
    assert edit[0] in source
    declared = {**all_declared(), **solidity_enums(source.replace(*edit))}
    assert mismatches(declared, SOLIDITY_ENUMS), f"{edit} went unnoticed"


def test_members_compare_with_the_raw_uint8_a_contract_returns():
    assert ChallengeStatus(4) is ChallengeStatus.PROVIDER_FAULTED and JobStatus.REFUNDED == 5
    assert ChallengeStatus(4).name.lower() == "provider_faulted"  # the indexer's spelling
