"""A csv file's column names, read from its first line alone: what the DS-Agent analysis and the workspace
builder look for (a label column, an id column) before reading a file whole."""

from __future__ import annotations

import csv
from pathlib import Path


def csv_header(path: Path) -> list[str]:
    """The names on `path`'s first line; none when that line does not split as csv."""
    with path.open(newline="", encoding="utf-8", errors="replace") as fh:
        try:
            return next(csv.reader(fh), [])
        except csv.Error:
            return []
