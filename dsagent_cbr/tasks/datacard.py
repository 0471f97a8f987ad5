"""The data card: a compact, deterministic markdown account of a task's public files, so that a model
(or a person) never has to guess a column name, a dtype or what the target looks like.

It reads only the public files (our layout's data.public, DS-Agent's env/), never private answers; at
most MAX_ROWS rows of a CSV are read (the row count itself is exact), at most MAX_COLUMNS columns are
described one by one, and the summary of each file is cached by its path, size and modification time.

A wide file (more than WIDE_COLUMNS columns) has its numbered columns (`pixel0`…`pixel783`, `f_00`…,
`sensor_1_mean`, `sensor_2_mean`…) of one dtype summarised a group per line, so that hundreds of look-alike
columns cost a few lines and every column is still accounted for, by name or inside a named group.
A text column of at most MAX_LEVELS values has every value shown, with its share of the rows."""

from __future__ import annotations

import csv
import functools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsagent_cbr.tasks.model import Task

MAX_ROWS = 50_000
MAX_COLUMNS = 60
EXAMPLE_CHARS = 60
MAX_CLASSES = 20
MORE_NAMES_CHARS = 1500
MAX_LEVELS = 12  # a text column with at most this many values has every value (and its share) shown
WIDE_COLUMNS = 40  # beyond this many columns, numbered look-alike columns are grouped
MIN_GROUP = 3  # two numbered columns (`BsmtFinSF1`, `BsmtFinSF2`) read better one by one
MAX_RUNS = 8  # runs of numbers named in a group whose numbers have gaps


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str
    missing: float  # share of the rows read
    distinct: int
    examples: tuple[str, ...]
    # Every level of a low-cardinality text or bool column, most frequent first: (as shown, share of rows).
    levels: tuple[tuple[str, float], ...] = ()
    # smallest and largest value of a numeric column, for its group's range
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class ColumnGroup:
    """Columns of one dtype named alike but for their numbers: `pieces[0]`, a number, `pieces[1]`, …"""

    pieces: tuple[str, ...]
    dtype: str
    columns: tuple[Column, ...]
    # each column's numbers as written (`00` in `f_00`), in file order
    numbers: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class CsvSummary:
    rows: int
    rows_read: int
    columns: tuple[Column, ...]
    frame: Any  # the rows read (pandas DataFrame), for target distributions


def _cut(text: str, limit: int = EXAMPLE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _example(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(_cut(value), ensure_ascii=False)
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def _count_rows(path: Path) -> int:
    """Exact data rows of a CSV (quoted newlines included), without building a frame."""
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        return max(sum(1 for _ in csv.reader(handle)) - 1, 0)


@functools.lru_cache(maxsize=64)
def _summarise_csv(
    path: str, mtime_ns: int, size: int, max_rows: int, hidden: tuple[str, ...]
) -> CsvSummary:
    import pandas as pd

    frame = pd.read_csv(path, nrows=max_rows, low_memory=False)
    frame = frame.drop(columns=[c for c in hidden if c in frame.columns])
    rows = len(frame) if len(frame) < max_rows else _count_rows(Path(path))
    columns = tuple(_column(str(name), frame[name]) for name in frame.columns)
    return CsvSummary(rows, len(frame), columns, frame)


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _column(name: str, values: Any) -> Column:
    """One column as read. A text column of few levels lists them all: two examples of five levels left a
    model guessing at the other three."""
    present = values.dropna()
    examples = tuple(_example(_plain(v)) for v in present.drop_duplicates()[:2])
    missing = float(values.isna().mean()) if len(values) else 0.0
    distinct = int(present.nunique())
    levels: tuple[tuple[str, float], ...] = ()
    low = high = None
    if _is_numeric(values):
        if len(present):
            low, high = float(present.min()), float(present.max())
    elif 0 < distinct <= MAX_LEVELS:
        counts = present.value_counts(sort=False).items()
        shares = [(_example(_plain(v)), n / len(values)) for v, n in counts]
        # Most frequent first, ties by their text, so that the card is the same on every run.
        levels = tuple(sorted(shares, key=lambda level: (-level[1], level[0])))
    return Column(name, str(values.dtype), missing, distinct, examples, levels, low, high)


def summarise_csv(path: Path, max_rows: int = MAX_ROWS, hidden: tuple[str, ...] = ()) -> CsvSummary:
    """The file as a script sees it: `hidden` columns (test labels the runner strips) left out."""
    stat = path.stat()
    return _summarise_csv(str(path.resolve()), stat.st_mtime_ns, stat.st_size, max_rows, hidden)


def _percent(share: float) -> str:
    if share == 0:
        return "0%"
    return f"{100 * share:.1f}%" if share >= 0.001 else "<0.1%"


def _number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


def _share(share: float) -> str:
    """A level's share of rows in whole percent; never `0%` or `100%` for a share that is neither."""
    if 0 < share < 0.01:
        return "<1%"
    return ">99%" if 0.99 < share < 1 else f"{100 * share:.0f}%"


def _examples(column: Column) -> str:
    if column.levels:
        return ", ".join(f"{text} {_share(share)}" for text, share in column.levels)
    return ", ".join(column.examples)


def _column_table(summary: CsvSummary, keep: set[str]) -> list[str]:
    """The columns of a file: one table row each (the id and targets always among them), at most
    MAX_COLUMNS, the rest by name; in a wide file, its groups of numbered look-alike columns a line each."""
    columns = list(summary.columns)
    groups = _groups(columns, keep) if len(columns) > WIDE_COLUMNS else []
    grouped = {c.name for g in groups for c in g.columns}
    single = [c for c in columns if c.name not in grouped]
    if not groups:
        return _rows_table(single, keep)
    # The count up front, so that a model can check that the table and the groups hold every column.
    plural = "s" if len(groups) > 1 else ""
    lead = (
        f"{len(columns):,} columns: {len(single):,} listed one by one, {len(grouped):,} in "
        f"{len(groups):,} group{plural} of one name pattern and dtype after them."
    )
    lines = [lead, ""] + (_rows_table(single, keep) if single else [])
    return lines + ["", "Column groups:"] + [_group_line(g) for g in groups]


def _rows_table(columns: list[Column], keep: set[str]) -> list[str]:
    others = [c for c in columns if c.name not in keep]
    shown = (
        columns
        if len(columns) <= MAX_COLUMNS
        else ([c for c in columns if c.name in keep] + others[: MAX_COLUMNS - len(keep)])
    )
    shown_names = {c.name for c in shown}
    # A column of 0% in every row says nothing and costs tokens in every prompt: only when one is missing.
    gaps = any(c.missing for c in shown)
    # The header says when a cell holds every level, so that a model does not look for more of them.
    levels = any(c.levels for c in shown)
    heading = "examples, or every level and its share of rows" if levels else "examples"
    lines = [
        "| column | dtype |" + (" missing |" if gaps else "") + f" distinct | {heading} |",
        "|---|---|" + ("---:|" if gaps else "") + "---:|---|",
    ]
    for c in [c for c in columns if c.name in shown_names]:
        missing = f" {_percent(c.missing)} |" if gaps else ""
        examples = _examples(c).replace("|", "\\|")
        lines.append(f"| `{c.name}` | {c.dtype} |{missing} {c.distinct:,} | {examples} |")
    rest = [c.name for c in columns if c.name not in shown_names]
    if rest:
        names, used = [], 0
        for name in rest:
            used += len(name) + 4
            if used > MORE_NAMES_CHARS:
                break
            names.append(f"`{name}`")
        more = f" (and {len(rest) - len(names):,} more)" if len(names) < len(rest) else ""
        lines.append(f"\n{len(rest):,} more columns, not described: {', '.join(names)}{more}.")
    return lines


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


def _groups(columns: list[Column], keep: set[str]) -> list[ColumnGroup]:
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


def _group_name(group: ColumnGroup) -> str:
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


def _group_line(group: ColumnGroup) -> str:
    """The group's name, size, dtype, range of missing shares and its values: their range for numbers,
    else the levels of all its columns when few, else how many distinct values a column has."""
    columns = group.columns
    low, high = min(c.missing for c in columns), max(c.missing for c in columns)
    missing = _percent(low) if low == high else f"{_percent(low)} to {_percent(high)}"
    gaps = [f"`{c.name}`" for c in columns if c.missing]
    # which columns have gaps, when few enough to name: a model may want to impute them
    if low != high:
        missing += (
            f" ({', '.join(gaps)} only)"
            if len(gaps) <= MIN_GROUP
            else f" (in {len(gaps):,} columns)"
        )
    lows = [c.low for c in columns if c.low is not None]
    highs = [c.high for c in columns if c.high is not None]
    levels = sorted({text for c in columns for text, _ in c.levels})
    distinct = sorted({c.distinct for c in columns})
    if lows:
        values = f"values {_number(min(lows))} to {_number(max(highs))}"
    elif all(c.levels for c in columns) and len(levels) <= MAX_LEVELS:
        values = f"levels {', '.join(levels)}"
    elif distinct == [0]:
        values = "no values"
    else:
        spread = (
            f"{distinct[0]:,}" if len(distinct) == 1 else f"{distinct[0]:,} to {distinct[-1]:,}"
        )
        values = f"{spread} distinct values per column"
    return f"- {_group_name(group)} ({len(columns):,} columns): {group.dtype}, missing {missing}, {values}"


def _name_items(columns: tuple[Column, ...]) -> list[str]:
    """A file's column names for a sentence, a wide file's groups named as one item each."""
    groups = _groups(list(columns), set()) if len(columns) > WIDE_COLUMNS else []
    first = {g.columns[0].name: g for g in groups}
    grouped = {c.name for g in groups for c in g.columns}
    items = []
    for c in columns:
        if c.name in first:
            items.append(f"{_group_name(first[c.name])} ({len(first[c.name].columns):,} columns)")
        elif c.name not in grouped:
            items.append(f"`{c.name}`")
    return items


def target_distribution(values: Any, task_type: str) -> str:
    """Class counts for classification, quantiles for a numeric target."""
    present = values.dropna()
    if task_type.endswith("classification") or not _is_numeric(present):
        counts = present.astype(str).value_counts()
        counts = counts.sort_index(kind="stable").sort_values(ascending=False, kind="stable")
        total = max(int(counts.sum()), 1)
        parts = [
            f"{json.dumps(_cut(str(k), 40), ensure_ascii=False)} {n:,} ({100 * n / total:.1f}%)"
            for k, n in counts.iloc[:MAX_CLASSES].items()
        ]
        more = (
            f", and {len(counts) - MAX_CLASSES:,} more classes" if len(counts) > MAX_CLASSES else ""
        )
        return f"{len(counts):,} classes: " + ", ".join(parts) + more
    q = present.astype(float).quantile([0, 0.25, 0.5, 0.75, 1]).tolist()
    return (
        f"min {_number(q[0])}, 25% {_number(q[1])}, median {_number(q[2])}, 75% {_number(q[3])}, "
        f"max {_number(q[4])}, mean {_number(float(present.astype(float).mean()))}"
    )


def _is_numeric(values: Any) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)


def _rows_line(name: str, summary: CsvSummary) -> str:
    read = (
        f"; described from the first {summary.rows_read:,}"
        if summary.rows_read < summary.rows
        else ""
    )
    return f"`{name}`: {summary.rows:,} rows × {len(summary.columns):,} columns{read}"


def csv_card(
    public_dir: Path,
    files: list[str],
    *,
    target: list[str],
    id_column: str | None,
    metric: str,
    direction: str,
    task_type: str,
    classes: list[str] | None = None,
    hidden: dict[str, tuple[str, ...]] | None = None,
) -> str:
    """The card of a csv task from its public files, less the `hidden` columns of each. The first file
    holding the target is the training file; the others are described by how their columns differ."""
    hidden = hidden or {}
    summaries = {
        name: summarise_csv(public_dir / name, hidden=hidden.get(name, ()))
        for name in files
        if (public_dir / name).is_file()
    }
    train_name = next(
        (
            n
            for n, s in summaries.items()
            if target and all(t in {c.name for c in s.columns} for t in target)
        ),
        next(iter(summaries), None),
    )
    better = "higher is better" if direction == "maximize" else "lower is better"
    lines = ["## Data card", ""]
    lines += [f"- {_rows_line(name, s)}" for name, s in summaries.items()]
    lines.append(f"- Id column: `{id_column}`" if id_column else "- Id column: none declared")
    if target:
        lines.append(f"- Target: {', '.join(f'`{t}`' for t in target)} ({task_type})")
    if classes:
        lines.append(
            f"- Prediction columns (one probability per class): {', '.join(f'`{c}`' for c in classes)}"
        )
    lines.append(f"- Metric: {metric} ({better})")
    if train_name is None:
        return "\n".join(lines) + "\n"
    train = summaries[train_name]
    present = {c.name for c in train.columns}
    for t in target:
        if t in present:
            lines.append(
                f"- Distribution of `{t}` in `{train_name}`: {target_distribution(train.frame[t], task_type)}"
            )
    lines += ["", f"Columns of `{train_name}`:", ""]
    lines += _column_table(train, {*target, *([id_column] if id_column else [])})
    for name, s in summaries.items():
        if name == train_name:
            continue
        names = [c.name for c in s.columns]
        missing = [c.name for c in train.columns if c.name not in names]
        if set(names) <= present and set(missing) <= set(target):
            order = [c.name for c in train.columns if c.name in names]
            same = "in the same order" if order == names else "in another order"
            lack = f" without {', '.join(f'`{c}`' for c in missing)}" if missing else ""
            lines.append(f"\n`{name}` has the columns of `{train_name}`{lack}, {same}.")
        else:
            items = _name_items(s.columns)
            more = f" and {len(items) - MAX_COLUMNS:,} more" if len(items) > MAX_COLUMNS else ""
            lines.append(f"\n`{name}` columns: {', '.join(items[:MAX_COLUMNS])}{more}.")
    return "\n".join(lines) + "\n"


def npy_card(
    public_dir: Path, files: list[str], *, metric: str, direction: str, task_type: str
) -> str:
    """Shapes, dtypes and missing share of each array; the label distribution (or value quantiles) of
    the training labels."""
    import numpy as np
    import pandas as pd

    better = "higher is better" if direction == "maximize" else "lower is better"
    lines = ["## Data card", "", f"- Metric: {metric} ({better})", ""]
    lines += ["| file | shape | dtype | missing |", "|---|---|---|---:|"]
    labels = None
    for name in files:
        path = public_dir / name
        if not path.is_file() or path.suffix != ".npy":
            continue
        array = np.load(path, mmap_mode="r", allow_pickle=False)
        missing = float(np.isnan(array).mean()) if array.dtype.kind == "f" and array.size else 0.0
        lines.append(f"| `{name}` | {tuple(array.shape)} | {array.dtype} | {_percent(missing)} |")
        if name.startswith("y_train") or (labels is None and name.startswith("y")):
            labels = (name, array)
    if labels is not None:
        name, array = labels
        flat = np.asarray(array).ravel()
        values = pd.Series(flat[: MAX_ROWS * 20])
        kind = task_type if array.ndim == 1 else "regression"
        lines += ["", f"- Distribution of `{name}`: {target_distribution(values, kind)}"]
    return "\n".join(lines) + "\n"


def data_card(task: Task) -> str:
    """The task's data card, from its public files only (our layout or DS-Agent's); what the harness
    changes in a script's workspace is the harness's to say (harness/plan.py's describe)."""
    return _files_card(task).rstrip()


def _files_card(task: Task) -> str:
    files = list(task.public_files)
    target = list(task.target)
    hidden = {}
    if task.layout == "dsagent":
        files = sorted(f for f in files if f.endswith((".csv", ".npy")))
        # the test labels, constant in the workspace, are not described
        if task.dsagent is not None:
            target = list(task.dsagent.label_columns)
            if task.dsagent.label_file:
                hidden = {task.dsagent.label_file: task.dsagent.label_columns}
    if task.data_format == "npy" or (files and all(f.endswith(".npy") for f in files)):
        return npy_card(
            task.public_dir,
            files,
            metric=task.metric_name,
            direction=task.direction,
            task_type=task.task_type,
        )
    csvs = [f for f in files if f.endswith(".csv")]
    card = csv_card(
        task.public_dir,
        csvs,
        target=target,
        id_column=task.id_column,
        metric=task.metric_name,
        direction=task.direction,
        task_type=task.task_type,
        classes=list(task.classes) if task.metric_name == "logloss" else None,
        hidden=hidden,
    )
    for name, columns in hidden.items():
        card = (
            card.rstrip()
            + f"\n\nIn the workspace `{name}` keeps {', '.join(f'`{c}`' for c in columns)}, each "
            "holding one constant (the answers are graded outside): leave them out of the features, as the "
            "starter does.\n"
        )
    return card
