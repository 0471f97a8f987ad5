"""The public data checked the way develop, deploy and run will read it, before any of them starts: a file
that would stop them mid-run with a pandas or numpy traceback (an empty train.csv, a header without
rows, UTF-16 text, an array that needs pickle) becomes one problem line naming the file.

Cheap for big files: the first MB of a CSV is checked for its encoding, and at most csv_summary.MAX_ROWS
rows are parsed, the rows the data card parses itself (strictly, as UTF-8); arrays are opened
memory-mapped, so only their headers are read.

A public entry that is not a regular file or a folder of them (a link, a pipe, a socket, a device) is
named too, as the workspace builder would refuse it mid-start: it is looked at with lstat only, never
opened, since opening a pipe blocks."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

from dsagent_cbr.tasks.csv_summary import MAX_ROWS
from dsagent_cbr.tasks.model import Task

HEAD_BYTES = 1 << 20
# Longest first: a UTF-32 little-endian mark begins with the UTF-16 one.
_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)
_AS_UTF8 = "save it as UTF-8"


def data_problems(task: Task) -> list[str]:
    """One line per public file develop, deploy or run would trip on; empty when all is well."""
    odd = {
        name: why for name in task.public_files if (why := entry_problem(task.public_dir / name))
    }
    problems = [f"{task.public_dir / name}: {why}" for name, why in odd.items()]
    # Links are all in `odd`, so is_file() follows none here; a folder's own files are not parsed.
    files = [f for f in task.public_files if f not in odd and (task.public_dir / f).is_file()]
    headers: dict[str, list[str]] = {}
    for name in (f for f in files if f.lower().endswith(".csv")):
        path = task.public_dir / name
        why, columns = csv_problem(path)
        if why:
            problems.append(f"{path}: {why}")
        else:
            headers[name] = columns
    if task.data_format == "csv":
        problems += _column_problems(task, headers)
    problems += array_problems(task.public_dir, [f for f in files if f.lower().endswith(".npy")])
    return problems


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


_REGULAR = "a task's public data must be regular files and folders of them"


def entry_problem(path: Path) -> str | None:
    """Why a public entry cannot be copied into a workspace, or None: it is a link (which could lead out
    of the task), a pipe (which would block the run), a socket or a device, or a folder holding one."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISDIR(mode):
            inner = _odd_inside(path)
            return f"a folder holding {_kind(inner[1])} ({inner[0]}); {_REGULAR}" if inner else None
    except OSError as exc:
        return f"cannot be looked at ({exc.strerror or exc})"
    return None if stat.S_ISREG(mode) else f"{_kind(mode)}; {_REGULAR}"


def _odd_inside(folder: Path) -> tuple[Path, int] | None:
    """The first entry under `folder` that is neither a folder nor a regular file, with its mode."""
    stack = [folder]
    while stack:
        here = stack.pop()
        with os.scandir(here) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            mode = os.lstat(here / name).st_mode
            if stat.S_ISDIR(mode):
                stack.append(here / name)
            elif not stat.S_ISREG(mode):
                return (here / name).relative_to(folder), mode
    return None


def _one_line(exc: BaseException, limit: int = 200) -> str:
    return " ".join(str(exc).split())[:limit] or type(exc).__name__


def encoding_problem(path: Path) -> str | None:
    """Why the start of a CSV is not UTF-8 text, or None. UTF-16 without a byte-order mark decodes as
    UTF-8 full of NUL bytes, so NULs are refused too."""
    with path.open("rb") as fh:
        head = fh.read(HEAD_BYTES)
    if not head:
        return "empty (0 bytes); a CSV needs a header and at least one data row"
    for bom, name in _BOMS:
        if head.startswith(bom):
            return f"{name} text, not UTF-8; {_AS_UTF8}"
    if b"\x00" in head:
        return f"holds NUL bytes (UTF-16 or binary data?), not UTF-8 text; {_AS_UTF8}"
    try:  # not final: the first MB may end inside a character
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError as exc:
        return f"not UTF-8 (byte {exc.start}); {_AS_UTF8}"
    return None


def csv_problem(path: Path) -> tuple[str | None, list[str]]:
    """(why the CSV cannot be used, its columns): read as the data card reads it."""
    import pandas as pd

    try:
        why = encoding_problem(path)
        if why:
            return why, []
        frame = pd.read_csv(path, nrows=MAX_ROWS, low_memory=False)
    except pd.errors.EmptyDataError:
        return "no header and no rows (blank lines only)", []
    except UnicodeDecodeError as exc:
        return f"not UTF-8 after its first MB ({exc.reason}); {_AS_UTF8}", []
    except (ValueError, OSError) as exc:  # pandas' ParserError is a ValueError
        return f"does not parse as CSV ({_one_line(exc)})", []
    if frame.empty and len(frame.columns):
        return "a header and no data rows", []
    return None, [str(c) for c in frame.columns]


def _column_problems(task: Task, headers: dict[str, list[str]]) -> list[str]:
    """The columns the skeleton reads: the target(s) and the id in train.csv, the id in the test file."""
    test = task.test_file if task.test_file in headers else None
    train = "train.csv" if "train.csv" in headers else next((n for n in headers if n != test), None)
    problems = []
    if train is not None:
        missing = [t for t in task.target if t not in headers[train]]
        if missing:
            problems.append(
                f"{task.public_dir / train}: no target column {', '.join(map(repr, missing))} "
                "(data.target in task.toml)"
            )
    for name in dict.fromkeys(n for n in (train, test) if n is not None):
        if task.id_column and task.id_column not in headers[name]:
            problems.append(
                f"{task.public_dir / name}: no id column {task.id_column!r} (data.id_column in task.toml)"
            )
    return problems


def array_problems(folder: Path, names: list[str]) -> list[str]:
    """Each array loads without pickle and has rows; X_<part> and y_<part> have as many rows."""
    import numpy as np

    problems, rows = [], {}
    for name in names:
        path = folder / name
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)  # as the data card opens it
        except (ValueError, OSError, EOFError) as exc:
            problems.append(
                f"{path}: not a .npy array that loads without pickle ({_one_line(exc)})"
            )
            continue
        if array.ndim == 0 or array.shape[0] == 0:
            problems.append(f"{path}: holds no rows (shape {tuple(array.shape)})")
            continue
        rows[name] = int(array.shape[0])
    for name, n in rows.items():
        partner = next(
            (p for p in rows if p[0] in "Xx" and name[0] in "yY" and p[1:] == name[1:]), None
        )
        if partner is not None and rows[partner] != n:
            problems.append(
                f"{folder / name}: {n:,} rows but {partner} has {rows[partner]:,}; "
                "their first dimensions must agree"
            )
    return problems
