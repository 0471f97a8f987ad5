"""The package's folders form layers: no two of them import each other, by any import (a lazy one inside
a function included). The search (search/) builds on the agent's run (agent/), the report (report/) reads
the agent's record, and neither is imported back."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dsagent_cbr"


def imports_between_folders() -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).parts
        here = parts[0] if len(parts) > 1 else path.stem
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dsagent_cbr."):
                there = node.module.split(".")[1]
                if there != here:
                    found[here].add(there)
    return found


def test_no_two_folders_import_each_other():
    found = imports_between_folders()
    cycles = sorted({tuple(sorted((a, b))) for a, targets in found.items() for b in targets if a in found.get(b, ())})
    assert cycles == []
    assert "search" in found["commands"] and "search" not in found["agent"] and "report" not in found["agent"]
