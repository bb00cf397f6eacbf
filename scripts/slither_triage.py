#!/usr/bin/env python3
"""Fails unless docs/SLITHER_TRIAGE.md explains every finding of a slither JSON report.

Usage: slither_triage.py REPORT.json TRIAGE.md

A finding is keyed by its detector and the first name its description gives (a function as
`Contract.function`, or a contract), so that the triage survives edits that move lines. TRIAGE.md's
table rows `| `detector` | `where` | verdict | why |` explain it when `where` is that name,
`Contract.*` or `*` (the detector everywhere). Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

_NAME = re.compile(r"^(?:Reentrancy in |Low level call in |Function |Parameter |Variable |Modifier |Contract )?([\w$]+(?:\.[\w$]+)?)")


def finding_key(finding: dict) -> tuple[str, str]:
    first_line = finding["description"].split("\n", 1)[0]
    match = _NAME.match(first_line)
    return finding["check"], match.group(1) if match else first_line


def triage_rows(markdown: str) -> list[tuple[str, str]]:
    rows = []
    for line in markdown.splitlines():
        cells = [c.strip().strip("`").strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not line.lstrip().startswith("|") or set(cells[0]) <= set("-: "):
            continue
        if cells[0].lower() == "detector":
            continue
        if not cells[3]:
            raise SystemExit(f"SLITHER_TRIAGE: row without a reason: {line.strip()}")
        rows.append((cells[0], cells[1]))
    return rows


def explained(key: tuple[str, str], rows: list[tuple[str, str]]) -> bool:
    check, name = key
    contract = name.split(".", 1)[0]
    return any(c == check and w in (name, "*", f"{contract}.*") for c, w in rows)


def main(report_path: str, triage_path: str) -> int:
    report = json.loads(Path(report_path).read_text())
    if not report.get("success"):
        print(f"slither failed: {report.get('error')}", file=sys.stderr)
        return 2
    findings = report.get("results", {}).get("detectors", [])
    rows = triage_rows(Path(triage_path).read_text())
    untriaged = [f for f in findings if not explained(finding_key(f), rows)]
    for f in untriaged:
        check, name = finding_key(f)
        print(f"UNTRIAGED [{f['impact']}] {check} {name}\n{f['description']}", file=sys.stderr)
    print(f"slither: {len(findings)} findings, {len(findings) - len(untriaged)} explained in {triage_path}, "
          f"{len(untriaged)} not")
    return 1 if untriaged else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
