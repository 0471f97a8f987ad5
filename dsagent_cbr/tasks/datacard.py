"""The data card: a compact, deterministic markdown account of a task's public files, so that a model
(or a person) never has to guess a column name, a dtype or what the target looks like.

It reads only the public files (our layout's data.public, DS-Agent's env/), never private answers. At
most MAX_COLUMNS columns are described one by one. A text column of at most MAX_LEVELS values has every
value shown, with its share of the rows.

What a CSV file holds is read by tasks/csv_summary.py. A wide file's numbered look-alike columns are
grouped by tasks/column_groups.py, and written here a line per group."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from dsagent_cbr.tasks.column_groups import (
    MIN_GROUP,
    WIDE_COLUMNS,
    ColumnGroup,
    group_columns,
    group_name,
    name_items,
)
from dsagent_cbr.tasks.csv_summary import (
    MAX_LEVELS,
    MAX_ROWS,
    Column,
    CsvSummary,
    cut,
    is_numeric,
    summarise_csv,
)
from dsagent_cbr.tasks.model import Task

MAX_COLUMNS = 60
MAX_CLASSES = 20
MORE_NAMES_CHARS = 1500


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
    groups = group_columns(columns, keep) if len(columns) > WIDE_COLUMNS else []
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
    return f"- {group_name(group)} ({len(columns):,} columns): {group.dtype}, missing {missing}, {values}"


def target_distribution(values: Any, task_type: str) -> str:
    """Class counts for classification, quantiles for a numeric target."""
    present = values.dropna()
    if task_type.endswith("classification") or not is_numeric(present):
        counts = present.astype(str).value_counts()
        counts = counts.sort_index(kind="stable").sort_values(ascending=False, kind="stable")
        total = max(int(counts.sum()), 1)
        parts = [
            f"{json.dumps(cut(str(k), 40), ensure_ascii=False)} {n:,} ({100 * n / total:.1f}%)"
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
        if name != train_name:
            lines.append(_other_file_line(name, s, train_name, train, target))
    return "\n".join(lines) + "\n"


def _other_file_line(
    name: str, summary: CsvSummary, train_name: str, train: CsvSummary, target: list[str]
) -> str:
    """A file beside the training file: how its columns differ from the training file's, or its names."""
    present = {c.name for c in train.columns}
    names = [c.name for c in summary.columns]
    missing = [c.name for c in train.columns if c.name not in names]
    if set(names) <= present and set(missing) <= set(target):
        order = [c.name for c in train.columns if c.name in names]
        same = "in the same order" if order == names else "in another order"
        lack = f" without {', '.join(f'`{c}`' for c in missing)}" if missing else ""
        return f"\n`{name}` has the columns of `{train_name}`{lack}, {same}."
    items = name_items(summary.columns)
    more = f" and {len(items) - MAX_COLUMNS:,} more" if len(items) > MAX_COLUMNS else ""
    return f"\n`{name}` columns: {', '.join(items[:MAX_COLUMNS])}{more}."


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
