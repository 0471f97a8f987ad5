"""Groups of numbered look-alike columns in a wide file: `pixel0`…`pixel783`, `f_00`…, `sensor_1_mean`,
`sensor_2_mean`…

In a file of more than WIDE_COLUMNS columns, those of one dtype and one name pattern form a group, and
each group is named in a few words. So hundreds of look-alike columns cost a few lines, and every column
is still accounted for, by name or inside a named group.

It is apart from tasks/datacard.py because finding and naming the groups works on column names alone.
The card writes a line for each group."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsagent_cbr.tasks.csv_summary import Column

WIDE_COLUMNS = 40  # beyond this many columns, numbered look-alike columns are grouped
MIN_GROUP = 3  # two numbered columns (`BsmtFinSF1`, `BsmtFinSF2`) read better one by one
MAX_RUNS = 8  # runs of numbers named in a group whose numbers have gaps


@dataclass(frozen=True)
class ColumnGroup:
    """Columns of one dtype named alike but for their numbers: `pieces[0]`, a number, `pieces[1]`, …"""

    pieces: tuple[str, ...]
    dtype: str
    columns: tuple[Column, ...]
    # each column's numbers as written (`00` in `f_00`), in file order
    numbers: tuple[tuple[str, ...], ...]


_NUMBER = re.compile(r"\d+")


def _name_parts(name: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The pieces of a name around its numbers, and those numbers, counting only a number that ends the name
    or one of its parts (`pixel12`, `f_00`, `sensor_3_mean`, `1/22/20`): one inside a word (`v2x`) names
    a different thing."""
    pieces = []
    numbers = []
    start = 0
    for found in _NUMBER.finditer(name):
        if found.end() == len(name) or not name[found.end()].isalnum():
            pieces.append(name[start : found.start()])
            numbers.append(found.group())
            start = found.end()
    return (tuple(pieces) + (name[start:],), tuple(numbers)) if numbers else None


def group_columns(columns: list[Column], keep: set[str]) -> list[ColumnGroup]:
    """Groups of at least MIN_GROUP columns of one dtype named alike, in the order of their first column;
    the `keep` columns (id, targets) are never grouped."""
    found: dict[tuple[tuple[str, ...], str], list[tuple[tuple[str, ...], Column]]] = {}
    for column in columns:
        parts = None if column.name in keep else _name_parts(column.name)
        if parts is not None:
            found.setdefault((parts[0], column.dtype), []).append((parts[1], column))
    return [
        ColumnGroup(pieces, dtype, tuple(c for _, c in members), tuple(n for n, _ in members))
        for (pieces, dtype), members in found.items()
        if len(members) >= MIN_GROUP
    ]


def _pattern(group: ColumnGroup, varying: list[int]) -> str:
    """The names with each varying number as `{n}` and the others as written (`sensor_{n}_reading_3`)."""
    fixed = group.numbers[0]
    inner = [
        piece + ("{n}" if i in varying else fixed[i]) for i, piece in enumerate(group.pieces[:-1])
    ]
    return "".join(inner) + group.pieces[-1]


def _runs(texts: list[str], numbers: list[int]) -> str:
    """Sorted numbers as runs, `1–3, 5, 7–9`, at most MAX_RUNS of them."""
    runs: list[list[str]] = []
    for i, text in enumerate(texts):
        if i and numbers[i] == numbers[i - 1] + 1:
            runs[-1][1] = text
        else:
            runs.append([text, text])
    parts = [first if first == last else f"{first}–{last}" for first, last in runs]
    return ", ".join(parts[:MAX_RUNS]) + (", …" if len(parts) > MAX_RUNS else "")


def group_name(group: ColumnGroup) -> str:
    """First and last name when one number varies without a gap (`pixel0` … `pixel783`); the pattern and
    its runs of numbers when it has gaps; the pattern, first and last name when several numbers vary."""
    varying = [i for i in range(len(group.pieces) - 1) if len({n[i] for n in group.numbers}) > 1]
    # a grid or dates (`1/22/20`): the file's order is the one that means something
    if len(varying) != 1:
        first, last = group.columns[0].name, group.columns[-1].name
        return f"`{_pattern(group, varying)}`, from `{first}` to `{last}` in the file's order"
    at = varying[0]
    ordered = sorted(
        zip(group.numbers, group.columns, strict=True), key=lambda m: (int(m[0][at]), m[0][at])
    )
    numbers = [int(n[at]) for n, _ in ordered]
    if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
        return f"`{ordered[0][1].name}` … `{ordered[-1][1].name}`"
    return f"`{_pattern(group, varying)}` for n in {_runs([n[at] for n, _ in ordered], numbers)}"


def name_items(columns: tuple[Column, ...]) -> list[str]:
    """A file's column names for a sentence, a wide file's groups named as one item each."""
    groups = group_columns(list(columns), set()) if len(columns) > WIDE_COLUMNS else []
    first = {g.columns[0].name: g for g in groups}
    grouped = {c.name for g in groups for c in g.columns}
    items = []
    for c in columns:
        if c.name in first:
            items.append(f"{group_name(first[c.name])} ({len(first[c.name].columns):,} columns)")
        elif c.name not in grouped:
            items.append(f"`{c.name}`")
    return items
