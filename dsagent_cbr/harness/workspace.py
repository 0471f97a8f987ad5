"""The one builder of every file a script sees. Each public file of a task is written by one rule:

    the labelled file      train csv; X_train.npy with y_train.npy     its rows without the held ones
                                                                       (a refit's: every row)
    the test file          test csv; X_test.npy; DS-Agent's test csv   its rows and the held rows' features,
                                                                       mixed (mixing.py); a label column
                                                                       holds one constant
    a file of the test ids a sample submission                         the same rows in the same order, each
                                                                       with a value of the file's own
    a file labelling rows  another csv with the id and a target        the held rows' rows removed
    another csv with ids   a table of more columns by id               its ids renamed as the test file's
    DS-Agent's submission.py                                           a stand-in that only saves predictions
    anything else                                                      copied as it is

and the script as train.py. A held row's label is in none of them, whatever the layout
(tests/test_workspace_property.py builds every layout twice, the held labels changed between the two,
and finds the workspaces identical), and neither their order nor their ids say which rows are held
(tests/test_row_order_property.py). A refit's test file holds the test rows alone, where the first
fit saw them. Files are copied, never linked (a link would lead back to the task folder), and only
regular files are: a link, a pipe or a device in a task's data is refused, since it could lead outside
or block the run."""

from __future__ import annotations

import ast
import io
import os
import shutil
import stat
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dsagent_cbr.errors import CbrError
from dsagent_cbr.harness.plan import (
    NPY,
    Held,
    files_stamp,
    id_key,
    id_keys,
    read_text_csv,
)
from dsagent_cbr.harness.selection_key import task_seed
from dsagent_cbr.python_syntax import parse as parse_python
from dsagent_cbr.tasks.dsagent_layout import SUBMIT
from dsagent_cbr.tasks.headers import csv_header
from dsagent_cbr.tasks.model import Task

if TYPE_CHECKING:
    import pandas as pd

SCRIPT = "train.py"
Written = dict[str, tuple[int, int]]  # relative path -> (size, mtime_ns) of what cbr wrote


class TaskDataError(CbrError):
    """Data from outside (a task's public files, a benchmark's tables, the data of an analysis)
    holds something cbr does not copy: the data's problem, one sentence."""


def build(
    task: Task, held: Held | None, folder: Path, script: str, *, refit: bool = False
) -> Written:
    """Write the workspace for one run of `script` in `folder`; a refit's (`held` its for_refit view)
    training file keeps every labelled row. Returns what cbr wrote, so that a harvest can leave it
    out."""
    folder.mkdir(parents=True, exist_ok=True)
    files = rendered(task, held, refit)
    for name in task.public_files:
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name in files:
            target.write_bytes(files[name])
        elif task.dsagent is not None and name == "submission.py":
            source = (task.public_dir / name).read_text(encoding="utf-8")
            target.write_text(submission_stand_in(source), encoding="utf-8")
        else:
            copy_entry(task.public_dir / name, target)
    (folder / SCRIPT).write_text(script, encoding="utf-8")
    return written(folder)


def rendered(task: Task, held: Held | None, refit: bool) -> dict[str, bytes]:
    """The files the held rows change, as bytes by public name. Every node of a run gets the same ones,
    so they are made once: on five million rows making them took 30 s, writing them takes one."""
    stamp = (files_stamp(task), task_seed(task.name, PLACEHOLDER_STREAM))
    return _rendered(task, held, refit, stamp)


# a search's first fits and its refit; the bytes stay in cbr's process, where no script reaches them
@lru_cache(maxsize=2)
def _rendered(task: Task, held: Held | None, refit: bool, _stamp: object) -> dict[str, bytes]:
    return {name: _bytes(content) for name, content in _frames(task, held, refit).items()}


def _frames(
    task: Task, held: Held | None, refit: bool
) -> dict[str, pd.DataFrame | np.ndarray | bytes]:
    """The files the held rows change (and DS-Agent's test file, whose labels change), by public name."""
    arrays = task.data_format in ("npy", "dsagent") and all(n in task.public_files for n in NPY)
    files: dict[str, pd.DataFrame | np.ndarray | bytes] = {}
    if arrays and held is not None:
        files |= _arrays(task, held, refit)
    elif task.data_format == "csv" and held is not None:
        files |= _csv_files(task, held, refit)
    if task.dsagent is not None and task.dsagent.label_file:
        files |= _dsagent_files(task, None if arrays else held, refit)
    return files


def _bytes(content: pd.DataFrame | np.ndarray | bytes) -> bytes:
    if isinstance(content, bytes):
        return content
    buffer = io.BytesIO()
    if isinstance(content, np.ndarray):
        np.save(buffer, content, allow_pickle=False)
    else:
        content.to_csv(buffer, index=False)
    return buffer.getvalue()


def submission_stand_in(source: str) -> str:
    """DS-Agent's submission.py as the workspace gets it: its imports, helpers and constants, with a
    submit function that only saves the predictions (untrusted/dsagent_capture.py) for the grader."""
    tree = parse_python(source)
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    literal = ast.Constant | ast.List | ast.Tuple | ast.Dict
    body = [
        node
        for node in tree.body
        if not (isinstance(node, ast.FunctionDef) and node.name == SUBMIT)
        and (
            isinstance(node, keep)
            or (isinstance(node, ast.Assign) and isinstance(node.value, literal))
            or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        )
    ]  # the docstring
    capture = (
        resources.files("dsagent_cbr.untrusted")
        .joinpath("dsagent_capture.py")
        .read_text(encoding="utf-8")
    )
    return ast.unparse(ast.Module(body=body, type_ignores=[])) + "\n\n" + capture


# -- the rules ----------------------------------------------------------------------------------------------
def training_rows(
    frame: pd.DataFrame | np.ndarray, held: Held, refit: bool
) -> pd.DataFrame | np.ndarray:
    """The labelled file as the script gets it: without the held rows (and the windows dropped with
    them), or whole for a refit."""
    if refit:
        return frame
    gone = np.array([*held.positions, *held.dropped], dtype=int)
    if isinstance(frame, np.ndarray):
        return np.delete(frame, gone, axis=0)
    return frame.drop(index=frame.index[gone])


def _training_file(
    path: Path, train: pd.DataFrame, held: Held, refit: bool
) -> pd.DataFrame | bytes:
    """A labelled csv as the script gets it (`train` its rows as read). Where each row is a line of its
    own (no quotes, no blank lines), the file's own lines are kept: its bytes as the task wrote them, and
    on four million rows in a second where writing the frame took seven."""
    raw = path.read_bytes()
    if b'"' in raw or b"\r" in raw:
        return training_rows(train, held, refit)
    lines = raw.removesuffix(b"\n").split(b"\n")
    if len(lines) != len(train) + 1 or not all(lines):
        return training_rows(train, held, refit)
    if not refit:
        gone = {1 + p for p in (*held.positions, *held.dropped)}
        lines = [line for n, line in enumerate(lines) if n not in gone]
    return b"\n".join(lines) + b"\n"


PLACEHOLDER_STREAM = 2  # selection_key.task_seed's stream for the values a listing's held rows get


def mixed(
    frame: pd.DataFrame, held_rows: pd.DataFrame, given: set[str], held: Held, seed: int
) -> pd.DataFrame:
    """`frame`'s rows and one per held row, in the workspace's order: the columns in `given` from the held
    rows, every other column a value of one of `frame`'s own rows drawn at random, so that a held row
    looks like any other (a constant column stays one)."""
    import pandas as pd

    drawn = np.random.default_rng(seed).integers(0, max(len(frame), 1), len(held_rows))
    extra = pd.DataFrame(
        {
            c: held_rows[c].to_numpy() if c in given else _drawn(frame[c], drawn)
            for c in frame.columns
        },
        index=range(len(held_rows)),
    )
    both = pd.concat([frame, extra], ignore_index=True)
    return both.iloc[list(held.order)].reset_index(drop=True) if held.order else both


def _drawn(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    return column.to_numpy()[rows] if len(column) else np.full(len(rows), "")


def _csv_files(task: Task, held: Held, refit: bool) -> dict[str, pd.DataFrame | bytes]:
    assert task.train_file and task.test_file and task.id_column
    idc, targets = task.id_column, set(task.target)
    train = read_text_csv(task.public_dir / task.train_file)
    rows = train.iloc[list(held.positions)].assign(**{idc: list(held.shown_ids)})
    test = read_text_csv(task.public_dir / task.test_file)
    seed = task_seed(task.name, PLACEHOLDER_STREAM)
    renamed = _renaming(held, train[idc].iloc[list(held.positions)])
    files = {
        task.train_file: _training_file(task.public_dir / task.train_file, train, held, refit),
        task.test_file: mixed(
            _renamed(test, idc, renamed), rows, set(train.columns) - targets, held, seed
        ),
    }
    originals = set(map(id_key, train[idc].iloc[list(held.positions)]))
    with_ids = _files_with_ids(task)
    lists = _listing(task, test[idc], with_ids)
    for name in with_ids:
        frame = read_text_csv(task.public_dir / name)
        if name in lists:  # a sample submission: the held rows are listed, their values are not
            files[name] = mixed(_renamed(frame, idc, renamed), rows, {idc}, held, seed)
        elif targets & set(frame.columns):  # it labels rows by id: the held rows' go
            files[name] = frame[~id_keys(frame[idc]).isin(originals)]
        else:  # it describes rows by id: they keep their names as the test file gives them
            files[name] = _described(frame, idc, renamed, seed)
    return files


def _renaming(held: Held, own_held_ids: pd.Series) -> dict[str, str]:
    """Each test row's and held row's own id (as id_key gives it) to the id it carries in the workspace.
    A held row whose own id a test row has keeps none of it (it carries a fresh one)."""
    test = dict(zip(held.test_id_keys, held.test_shown, strict=True))
    ours = dict(zip(map(id_key, own_held_ids), held.shown_ids, strict=True))
    return {**ours, **test}


def _renamed(frame: pd.DataFrame, idc: str, renamed: dict[str, str]) -> pd.DataFrame:
    shown = id_keys(frame[idc]).map(renamed)
    return frame.assign(**{idc: shown.where(shown.notna(), frame[idc])})


def _described(frame: pd.DataFrame, idc: str, renamed: dict[str, str], seed: int) -> pd.DataFrame:
    """A file of more columns by id, renamed, and its test and held rows dealt at random among the places
    they hold: in a file in the ids' own order, the place of a renamed row would name its own id."""
    mine = np.flatnonzero(id_keys(frame[idc]).isin(set(renamed)))
    order = np.arange(len(frame))
    order[mine] = np.random.default_rng(seed).permutation(mine)
    return _renamed(frame, idc, renamed).iloc[order].reset_index(drop=True)


def _files_with_ids(task: Task) -> list[str]:
    """The public csv files, besides the training and test files, whose header holds the id column."""
    skip = {task.train_file, task.test_file}
    return [
        n
        for n in task.public_files
        if n not in skip
        and n.lower().endswith(".csv")
        and task.id_column in _header(task.public_dir / n)
    ]


def id_lists(task: Task) -> list[str]:
    """The public csv files that list the test rows' ids, each once, besides the test file: a sample
    submission. The held rows are listed in them too, with the file's own placeholder values."""
    if task.data_format != "csv" or not (task.test_file and task.id_column):
        return []
    test_ids = read_text_csv(task.public_dir / task.test_file)[task.id_column]
    return _listing(task, test_ids, _files_with_ids(task))


def _listing(task: Task, test_ids: pd.Series, names: list[str]) -> list[str]:
    """Those of `names` whose ids are exactly the test rows', one each."""
    assert task.id_column
    return [
        n for n in names if _lists(read_text_csv(task.public_dir / n)[task.id_column], test_ids)
    ]


def _header(path: Path) -> list[str]:
    """A csv's column names; none for anything that is not a regular file (a pipe would block)."""
    return csv_header(path) if path.is_file() and not path.is_symlink() else []


def _lists(ids: pd.Series, test_ids: pd.Series) -> bool:
    """Whether a file's ids are exactly the test rows' (one each)."""
    return len(ids) == len(test_ids) and set(id_keys(ids).tolist()) == set(id_keys(test_ids).tolist())


def _arrays(task: Task, held: Held, refit: bool) -> dict[str, np.ndarray]:
    X, y, X_test = (np.load(task.public_dir / n, allow_pickle=False) for n in NPY)
    picked = list(held.positions)
    return {
        "X_train.npy": training_rows(X, held, refit),
        "y_train.npy": training_rows(y, held, refit),
        "X_test.npy": held.mix(np.concatenate([X_test, X[picked]])),
    }


def label_constants(train: pd.DataFrame, columns: tuple[str, ...]) -> dict[str, str]:
    """Each label column's most common value in the rows the script trains on, as text: what the test
    file's labels become."""
    return {
        c: str(train[c].mode().iloc[0]) for c in columns if c in train.columns and len(train[c])
    }


def _dsagent_files(task: Task, held: Held | None, refit: bool) -> dict[str, pd.DataFrame]:
    """DS-Agent's test file with every column its scripts use, each label column one constant (their
    `drop(['y'], axis=1)` and `dropna(subset=[...])` run as written), the held rows after its own."""
    from dsagent_cbr.harness.plan import dsagent_train_file

    grading = task.dsagent
    assert grading is not None and grading.label_file
    test = read_text_csv(task.public_dir / grading.label_file)
    train_name = held.source if held is not None else dsagent_train_file(task)
    files: dict[str, pd.DataFrame] = {}
    constants: dict[str, str] = {}
    if train_name is not None:  # the constants come from the rows the script trains on
        train = read_text_csv(task.public_dir / train_name)
        if held is not None:  # without held rows the training file is copied as it is
            train = files[train_name] = training_rows(train, held, refit)
        constants = label_constants(train, grading.label_columns)
    if held is not None:
        given = set(test.columns) - set(grading.label_columns)
        answers = held.answers if held.rows else test.iloc[:0]
        test = mixed(test, answers, given, held, task_seed(task.name, PLACEHOLDER_STREAM))
    files[grading.label_file] = test.assign(
        **{c: constants.get(c, "0") for c in grading.label_columns}
    )
    return files


# -- copies, regular files only -------------------------------------------------------------------------------
def _refuse(path: Path, kind: str, what: str) -> TaskDataError:
    return TaskDataError(f"{path} is {kind}: {what} must be regular files and folders of them.")


def copy_entry(source: Path, target: Path, what: str = "a task's public data") -> None:
    """Copy a file, or a folder of them, without following a link or opening anything that is not
    a regular file (a link could lead to a file only root may read, a pipe would block the run, a
    device never end); `what` names the data in a refusal."""
    info = os.lstat(source)
    if stat.S_ISDIR(info.st_mode):
        target.mkdir(exist_ok=True)
        for entry in sorted(os.scandir(source), key=lambda e: e.name):
            copy_entry(source / entry.name, target / entry.name, what)
        return
    if not stat.S_ISREG(info.st_mode):
        kind = "a link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise _refuse(source, kind, what)
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:  # a link since the lstat (ELOOP), or no longer there
        raise _refuse(source, f"not a file cbr can open ({exc.strerror})", what) from None
    with os.fdopen(fd, "rb") as src:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):  # swapped since the lstat
            raise _refuse(source, "not a regular file", what)
        with target.open("wb") as out:
            shutil.copyfileobj(src, out, 2**20)


def written(folder: Path) -> Written:
    """Every regular file under `folder`, by relative path: (size, mtime_ns)."""
    found = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            info = path.stat()
            found[str(path.relative_to(folder))] = (info.st_size, info.st_mtime_ns)
    return found
