"""What a CSV file holds, column by column: its dtype, missing share, distinct values, examples, and
every level of a text column of few values.

At most MAX_ROWS rows are read; the row count itself is exact. A file's summary is cached by its path,
size and modification time.

It is apart from tasks/datacard.py, which writes the card. This module reads the file; the card decides
what to show of it."""

from __future__ import annotations

import csv
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_ROWS = 50_000
EXAMPLE_CHARS = 60
MAX_LEVELS = 12  # a text column with at most this many values has every value (and its share) shown


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
class CsvSummary:
    rows: int
    rows_read: int
    columns: tuple[Column, ...]
    frame: Any  # the rows read (pandas DataFrame), for target distributions


def cut(text: str, limit: int = EXAMPLE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _example(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(cut(value), ensure_ascii=False)
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
    if is_numeric(values):
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


def is_numeric(values: Any) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
