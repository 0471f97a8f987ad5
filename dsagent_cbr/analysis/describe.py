"""cbr's own first cell, which reads every data file and says what it holds, and what the prompts
say of each file. The cell holds untrusted/describe_data.py whole (the notebook then runs again
anywhere, with the data beside it) and calls its `describe` once per file; the prompts show it
without the helpers. A file's kind comes from its name and, for .json and .txt, from its first
bytes; the kernel's helpers sniff the rest (a table's separator and encoding)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePath

TABLES = {
    ".csv",
    ".tsv",
    ".tab",
    ".dat",
    ".parquet",
    ".pq",
    ".xlsx",
    ".xlsm",
    ".xls",
    ".feather",
    ".jsonl",
    ".ndjson",
}
TEXTS = {".md", ".markdown", ".rst", ".text", ".txt"}
KINDS = {"table": "a table", "json": "JSON", "text": "text", "other": "a file of another kind"}
PREFIXES = {"table": "df", "json": "json", "text": "text", "other": "file"}
MAX_FILES = 40  # described one by one; the others are only named
PEEK_BYTES = 4096
SETUP = ["pd.set_option('display.width', 160)", "pd.set_option('display.max_columns', 40)"]
SHOWN_NOTE = (
    "# cbr's first cell: describe(), cbr's helper (defined here, whole, in the notebook), reads\n"
    "# each file (a text table's separator and encoding sniffed) and prints what it holds"
)


@dataclass(frozen=True)
class DataFile:
    path: str  # as the cells read it, relative to their working folder
    kind: str  # a key of KINDS
    variable: str  # what the first cell loads it into


def data_files(paths: Sequence[str], folder: Path | None = None) -> list[DataFile]:
    """Each file with its kind and variable: `df` for the only table, else one named after the file
    (df_flights, text_manual, json_fees). `folder` holds the files, for a look at their first
    bytes; without it a .json is taken for a table and a .txt for text."""
    kinds = [_kind(path, folder) for path in paths]
    single = kinds.count("table") == 1
    taken: set[str] = set()
    files = []
    for path, kind in zip(paths, kinds, strict=True):
        variable = "df" if kind == "table" and single else _free(_name(path, kind), taken)
        taken.add(variable)
        files.append(DataFile(path, kind, variable))
    return files


def _kind(path: str, folder: Path | None) -> str:
    suffix = PurePath(path).suffix.lower()
    head = _peek(folder / path) if folder is not None else ""
    if suffix == ".json":
        return "json" if head.lstrip()[:1] == "{" else "table"
    if suffix == ".txt" and head:
        return "table" if looks_tabular(head) else "text"
    return "table" if suffix in TABLES else "text" if suffix in TEXTS else "other"


def _peek(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            return fh.read(PEEK_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def looks_tabular(head: str) -> bool:
    """Whether the first lines share one separator, the same number of times each: a table."""
    lines = [line for line in head.splitlines()[:10] if line.strip()]
    lines = lines[:-1] if len(head) >= PEEK_BYTES and len(lines) > 2 else lines
    return len(lines) >= 2 and any(
        len({line.count(sep) for line in lines}) == 1 and lines[0].count(sep) > 0 for sep in ",;\t|"
    )


def _name(path: str, kind: str) -> str:
    stem = re.sub(r"\W+", "_", PurePath(path).stem.lower()).strip("_") or "file"
    return f"{PREFIXES[kind]}_{stem}"


def _free(name: str, taken: set[str]) -> str:
    number, free = 2, name
    while free in taken:
        free, number = f"{name}_{number}", number + 1
    return free


def _helpers() -> str:
    source = resources.files("dsagent_cbr.untrusted").joinpath("describe_data.py")
    return source.read_text(encoding="utf-8").rstrip()


def is_first_cell(code: str) -> bool:
    """Whether `code` is cbr's first cell (its helpers are the same in every analysis)."""
    return code.startswith(_helpers())


def first_cell(files: Sequence[DataFile]) -> tuple[str, str]:
    """The first cell's code, and the same as the prompts show it (without the helpers)."""
    calls = [_call(file) for file in files[:MAX_FILES]]
    if len(files) > MAX_FILES:
        rest = ", ".join(file.path for file in files[MAX_FILES:])
        calls.append(f"print({f'and {len(files) - MAX_FILES} more files: {rest}'!r})")
    code = "\n".join([_helpers(), "", *SETUP, "", *calls])
    shown = "\n".join([SHOWN_NOTE, "import pandas as pd", "", *SETUP, "", *calls])
    return code + "\n", shown + "\n"


def _call(file: DataFile) -> str:
    described = f"describe({file.path!r}, {file.variable!r}, {file.kind!r})"
    return described if file.kind == "other" else f"{file.variable} = {described}"


def data_line(files: Sequence[DataFile]) -> str:
    """The files as every prompt names them: what each is, and where the first cell put it."""
    return "; ".join(
        f"{file.path} ({KINDS[file.kind]}"
        + ("" if file.kind == "other" else f", loaded as {file.variable} by the first cell")
        + ")"
        for file in files
    )
