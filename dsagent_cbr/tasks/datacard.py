"""The data card: a compact, deterministic markdown account of a task's public files, so that a model
(or a person) never has to guess a column name, a dtype or what the target looks like.

It reads only the public files (our layout's data.public, DS-Agent's env/), never private answers; at
most MAX_ROWS rows of a CSV are read (the row count itself is exact), at most MAX_COLUMNS columns are
described, and the summary of each file is cached by its path, size and modification time."""

from __future__ import annotations

import csv
import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsagent_cbr.tasks.model import Task

MAX_ROWS = 50_000
MAX_COLUMNS = 60
EXAMPLE_CHARS = 60
MAX_CLASSES = 20
MORE_NAMES_CHARS = 1500


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str
    missing: float  # share of the rows read
    distinct: int
    examples: tuple[str, ...]


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
def _summarise_csv(path: str, mtime_ns: int, size: int, max_rows: int, hidden: tuple[str, ...]) -> CsvSummary:
    import pandas as pd

    frame = pd.read_csv(path, nrows=max_rows, low_memory=False)
    frame = frame.drop(columns=[c for c in hidden if c in frame.columns])
    rows = len(frame) if len(frame) < max_rows else _count_rows(Path(path))
    columns = []
    for name in frame.columns:
        values = frame[name]
        present = values.dropna()
        examples = tuple(_example(v.item() if hasattr(v, "item") else v) for v in present.drop_duplicates()[:2])
        missing = float(values.isna().mean()) if len(values) else 0.0
        columns.append(Column(str(name), str(values.dtype), missing, int(present.nunique()), examples))
    return CsvSummary(rows, len(frame), tuple(columns), frame)


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


def _column_table(summary: CsvSummary, keep: set[str]) -> list[str]:
    """One row per column (the id and targets always among them), at most MAX_COLUMNS, then the rest by name."""
    columns = list(summary.columns)
    shown = columns if len(columns) <= MAX_COLUMNS else (
        [c for c in columns if c.name in keep] + [c for c in columns if c.name not in keep][: MAX_COLUMNS - len(keep)])
    shown_names = {c.name for c in shown}
    # A column of 0% in every row says nothing and costs tokens in every prompt: only when something is missing.
    gaps = any(c.missing for c in shown)
    lines = ["| column | dtype |" + (" missing |" if gaps else "") + " distinct | examples |",
             "|---|---|" + ("---:|" if gaps else "") + "---:|---|"]
    for c in [c for c in columns if c.name in shown_names]:
        examples = ", ".join(c.examples).replace("|", "\\|")
        missing = f" {_percent(c.missing)} |" if gaps else ""
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


def target_distribution(values: Any, task_type: str) -> str:
    """Class counts for classification, quantiles for a numeric target."""
    present = values.dropna()
    if task_type.endswith("classification") or not _is_numeric(present):
        counts = present.astype(str).value_counts()
        counts = counts.sort_index(kind="stable").sort_values(ascending=False, kind="stable")
        total = max(int(counts.sum()), 1)
        parts = [f"{json.dumps(_cut(str(k), 40), ensure_ascii=False)} {n:,} ({100 * n / total:.1f}%)"
                 for k, n in counts.iloc[:MAX_CLASSES].items()]
        more = f", and {len(counts) - MAX_CLASSES:,} more classes" if len(counts) > MAX_CLASSES else ""
        return f"{len(counts):,} classes: " + ", ".join(parts) + more
    q = present.astype(float).quantile([0, 0.25, 0.5, 0.75, 1]).tolist()
    return (f"min {_number(q[0])}, 25% {_number(q[1])}, median {_number(q[2])}, 75% {_number(q[3])}, "
            f"max {_number(q[4])}, mean {_number(float(present.astype(float).mean()))}")


def _is_numeric(values: Any) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)


def _rows_line(name: str, summary: CsvSummary) -> str:
    read = f"; described from the first {summary.rows_read:,}" if summary.rows_read < summary.rows else ""
    return f"`{name}`: {summary.rows:,} rows × {len(summary.columns):,} columns{read}"


def csv_card(public_dir: Path, files: list[str], *, target: list[str], id_column: str | None, metric: str,
             direction: str, task_type: str, classes: list[str] | None = None,
             hidden: dict[str, tuple[str, ...]] | None = None) -> str:
    """The card of a csv task from its public files, less the `hidden` columns of each. The first file
    holding the target is the training file; the others are described by how their columns differ."""
    hidden = hidden or {}
    summaries = {name: summarise_csv(public_dir / name, hidden=hidden.get(name, ()))
                 for name in files if (public_dir / name).is_file()}
    train_name = next((n for n, s in summaries.items() if target and all(
        t in {c.name for c in s.columns} for t in target)), next(iter(summaries), None))
    better = "higher is better" if direction == "maximize" else "lower is better"
    lines = ["## Data card", ""]
    lines += [f"- {_rows_line(name, s)}" for name, s in summaries.items()]
    lines.append(f"- Id column: `{id_column}`" if id_column else "- Id column: none declared")
    if target:
        lines.append(f"- Target: {', '.join(f'`{t}`' for t in target)} ({task_type})")
    if classes:
        lines.append(f"- Prediction columns (one probability per class): {', '.join(f'`{c}`' for c in classes)}")
    lines.append(f"- Metric: {metric} ({better})")
    if train_name is None:
        return "\n".join(lines) + "\n"
    train = summaries[train_name]
    present = {c.name for c in train.columns}
    for t in target:
        if t in present:
            lines.append(f"- Distribution of `{t}` in `{train_name}`: {target_distribution(train.frame[t], task_type)}")
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
            lines.append(f"\n`{name}` columns: {', '.join(f'`{c}`' for c in names[:MAX_COLUMNS])}"
                         + (f" and {len(names) - MAX_COLUMNS:,} more" if len(names) > MAX_COLUMNS else "") + ".")
    return "\n".join(lines) + "\n"


def npy_card(public_dir: Path, files: list[str], *, metric: str, direction: str, task_type: str) -> str:
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
    files, target, hidden = list(task.public_files), list(task.target), {}
    if task.layout == "dsagent":
        files = sorted(f for f in files if f.endswith((".csv", ".npy")))
        if task.dsagent is not None:  # the test labels, constant in the workspace, are not described
            target = list(task.dsagent.label_columns)
            if task.dsagent.label_file:
                hidden = {task.dsagent.label_file: task.dsagent.label_columns}
    if task.data_format == "npy" or (files and all(f.endswith(".npy") for f in files)):
        return npy_card(task.public_dir, files, metric=task.metric_name, direction=task.direction,
                        task_type=task.task_type)
    csvs = [f for f in files if f.endswith(".csv")]
    card = csv_card(task.public_dir, csvs, target=target, id_column=task.id_column,
                    metric=task.metric_name, direction=task.direction, task_type=task.task_type,
                    classes=list(task.classes) if task.metric_name == "logloss" else None, hidden=hidden)
    for name, columns in hidden.items():
        card = (card.rstrip() + f"\n\nIn the workspace `{name}` keeps {', '.join(f'`{c}`' for c in columns)}, each "
                "holding one constant (the answers are graded outside): leave them out of the features, as the "
                "starter does.\n")
    return card
