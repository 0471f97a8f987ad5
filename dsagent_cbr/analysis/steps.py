"""The parts of an analysis that need no model: the plan read from a reply, and the notebook as a
prompt shows it, its outputs cut to fit (cbr's first cell, which describes the data, is
describe.py's)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from dsagent_cbr.analysis.cells import CellResult, capped
from dsagent_cbr.llm.parsing import ParseError

FIRST_CELL_CHARS = 5000  # the description of a data file: columns, types, a few rows, oddities
MAX_FIRST_CELL_CHARS = 20_000  # of the description of several files
CELL_CHARS = 1500  # what a later cell printed, as a prompt shows it
NOTEBOOK_CHARS = 14_000  # all the cells' outputs in one prompt, the oldest cut first
CODE_CHARS = 3000


_STEP = re.compile(r"^[\s>*#_-]*(?:step\s*)?(\d{1,2})\s*[.):]\**\s+(.+)$", re.IGNORECASE)
_BULLET = re.compile(r"^\s*[-*•]\s+(.+)$")


def parse_steps(reply: str, role: str = "analyze_plan") -> list[str]:
    """The steps of a numbered plan ('1. Load ...', 'Step 2: ...', '**3.** ...'); a line that goes on
    from a step is part of it. A plan written as bullets is taken as numbered. ParseError when the reply
    holds neither."""
    for pattern, group in ((_STEP, 2), (_BULLET, 1)):
        steps: list[str] = []
        for line in reply.splitlines():
            match = pattern.match(line)
            if match:
                steps.append(match.group(group).strip().strip("*").strip())
            elif steps and line.strip() and line.startswith((" ", "\t")):
                steps[-1] += " " + line.strip()
        steps = [step for step in steps if step]
        if steps:
            return steps
    raise ParseError(role, "the reply holds no numbered steps", reply)


def say_plan(steps: Sequence[str], done: int = 0) -> str:
    """The plan as a prompt shows it, the steps already done marked."""
    return "\n".join(
        f"{n}. {step}" + (" (done)" if n <= done else "") for n, step in enumerate(steps, start=1)
    )


def printed(cell: CellResult) -> str:
    """All a cell gave back as text: what it printed, its value, its error."""
    parts = [cell.stdout.rstrip(), cell.result.rstrip()]
    if cell.error:
        parts.append(cell.error.rstrip())
    return "\n".join(part for part in parts if part) or "(it printed nothing)"


def cell_text(number: int, cell: CellResult, limit: int) -> str:
    output = capped(printed(cell), limit) if limit > 0 else "[output left out: see the later cells]"
    return f"[cell {number}]\n```python\n{capped(cell.code.rstrip(), CODE_CHARS)}\n```\nprinted:\n{output}"


def notebook_text(cells: Sequence[CellResult], total: int = NOTEBOOK_CHARS, files: int = 1) -> str:
    """The cells as a prompt shows them, each with what it printed. The first cell (the data's
    description: FIRST_CELL_CHARS for each of its `files`, at most MAX_FIRST_CELL_CHARS, and as much
    more room in `total`) and the latest ones keep the most; when all of them do not fit in `total`
    characters of output, the oldest of the others lose theirs first."""
    if not cells:
        return "(no cells yet)"
    first = min(FIRST_CELL_CHARS * max(files, 1), MAX_FIRST_CELL_CHARS)
    limits = [first] + [CELL_CHARS] * (len(cells) - 1)
    room = total + first - FIRST_CELL_CHARS - min(len(printed(cells[0])), first)
    for index in range(len(cells) - 1, 0, -1):
        wanted = min(len(printed(cells[index])), CELL_CHARS)
        limits[index] = wanted if wanted <= room else 0
        room -= limits[index]
    return "\n\n".join(
        cell_text(number, cell, limit)
        for number, (cell, limit) in enumerate(zip(cells, limits, strict=True), start=1)
    )
