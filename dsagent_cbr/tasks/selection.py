"""Selection rows: labelled rows the harness holds back from every script, as Kaggle's public leaderboard
holds back its labels. The script's training file lacks them; their features are appended to the file
it predicts (after the test rows), and the grader, outside the sandbox, scores what it predicted for
them. That score, the selection score, is what every choice is made on: a script cannot print it, and a
model trained on rows it was not given cannot have seen their labels.

Which rows: a seeded share of the labelled rows (stratified by class where the task classifies; whole
groups where task.toml names a group column; the latest rows where rows are in time, after the script's
own, so that time order holds). Forecasting windows overlap: a selection window is kept only when none
of its targets appears in what the script sees (the test inputs, the other selection inputs), and a
training window that shares a target with one is dropped.

`hold_out(task)` plans it (the same rows for every run of a task); `write_files` writes the workspace's
altered files; `Held` is what the grader needs afterwards."""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dsagent_cbr.tasks.dsagent_layout import hide_labels, training_csv
from dsagent_cbr.tasks.model import Task

if TYPE_CHECKING:
    import pandas as pd

SHARE = 0.2  # of the labelled rows
FLOOR = 100  # rows, when the data can spare them (at most a third)
CAP = 10_000  # rows: past this a larger share only costs the script training rows
FEWEST = 20  # labelled rows below which none can be spared: such a task is chosen on printed validation
NPY = ("X_train.npy", "y_train.npy", "X_test.npy")
WINDOWS = 8  # forecasting: the selection windows sought before the walk stops at the share


def selection_size(labelled: int) -> int:
    if labelled < FEWEST:
        return 0
    return min(max(round(SHARE * labelled), min(FLOOR, labelled // 3)), CAP)


@dataclass(frozen=True)
class Held:
    """One task's selection rows, as the grader needs them: which predictions are theirs and the labels."""

    rows: int
    labelled: int  # the labelled rows the share was taken from
    how: str  # in words, for the data card and the report
    test_rows: int  # positional layouts: the predictions' leading rows are the test's
    answers: Any = field(repr=False)  # csv: id and target columns (text); npy: the y rows; dsagent: the rows, labelled
    files: dict[str, Any] = field(default_factory=dict, repr=False)  # public name -> its workspace content
    ids: tuple[str, ...] = ()  # csv: the selection rows' ids in the predictions, as id_key gives them

    def worth(self, metric: str) -> str:
        """What one row moves the score by, where that is a fixed amount."""
        if metric == "accuracy":
            return f"one row is {100 / self.rows:.2g} accuracy points"
        return f"{self.rows} rows"


def id_key(value: object) -> str:
    """An id as text, so that 7, 7.0, "7" and "7.0" are one id whichever way a file was typed."""
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else text


def test_rows_only(task: Task, held: Held, raw: bytes) -> bytes:
    """The predictions a user uploads: the script's file without its predictions of the selection rows
    (csv by id, arrays by position), every other cell as the script wrote it."""
    if task.data_format == "npy":
        buffer = io.BytesIO()
        np.save(buffer, np.load(io.BytesIO(raw), allow_pickle=False)[: held.test_rows], allow_pickle=False)
        return buffer.getvalue()
    import pandas as pd

    assert task.id_column
    frame = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, na_filter=False)
    chosen = frame[task.id_column].map(id_key).isin(set(held.ids))
    return frame[~chosen].to_csv(index=False).encode("utf-8")


def _seed(task: Task) -> int:
    return zlib.crc32(task.name.encode("utf-8"))


def _stamp(task: Task) -> tuple[tuple[str, int, int], ...]:
    paths = [task.public_dir / n for n in task.public_files]
    return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in paths if p.is_file())


def hold_out(task: Task) -> Held | None:
    """The task's selection rows, or None where the harness cannot hold rows back (too few labelled
    rows, or a layout whose rows it cannot tell apart: the run is then chosen on printed validation)."""
    if not task.is_prepared():
        return None
    return _hold_out(task, _stamp(task))


@cache
def _hold_out(task: Task, _stamp: object) -> Held | None:
    if task.data_format in ("npy", "dsagent") and all(n in task.public_files for n in NPY):
        return _npy(task)
    if task.data_format == "csv" and task.train_file and task.test_file and task.id_column:
        return _csv(task)
    if task.data_format == "dsagent":
        return _dsagent(task)
    return None


def _read_text_csv(path: Path) -> pd.DataFrame:
    """Every cell as the text it was, so that the files a script reads change by rows and nothing else."""
    import pandas as pd

    return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)


def _chosen(task: Task, train: pd.DataFrame, labels: list[str]) -> tuple[np.ndarray, str] | None:
    """Positions of the selection rows in `train`, and how they were chosen."""
    size = selection_size(len(train))
    if size == 0:
        return None
    rng = np.random.default_rng(_seed(task))
    if task.time_column or task.task_type == "forecasting":
        order = np.arange(len(train))
        if task.time_column in train.columns:
            import pandas as pd

            order = np.argsort(pd.to_datetime(train[task.time_column], errors="coerce").to_numpy(), kind="stable")
        return np.sort(order[-size:]), f"the latest {size} rows"
    if task.group_column in train.columns:
        return _whole_groups(train[task.group_column].to_numpy(), size, rng), f"whole {task.group_column} groups"
    if len(labels) == 1 and task.task_type.endswith("classification") and task.task_type != "multilabel-classification":
        return _stratified(train[labels[0]].to_numpy(), size, rng), f"{size} rows stratified by {labels[0]}"
    return np.sort(rng.choice(len(train), size=size, replace=False)), f"{size} rows drawn at random"


def _stratified(labels: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Each class's share of the selection rows in proportion to its share of the data, at least one
    row of every class with two or more (so that AUROC and log loss are defined on them)."""
    classes, counts = np.unique(labels.astype(str), return_counts=True)
    want = np.floor(counts * size / counts.sum()).astype(int)
    want = np.where(counts >= 2, np.maximum(want, 1), 0)
    for k in np.argsort(-counts)[: max(size - want.sum(), 0)]:
        want[k] += 1 if want[k] < counts[k] - 1 else 0
    picked = [rng.choice(np.flatnonzero(labels.astype(str) == c), size=w, replace=False)
              for c, w in zip(classes, want, strict=True) if w]
    return np.sort(np.concatenate(picked)) if picked else np.array([], dtype=int)


def _whole_groups(groups: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    names = rng.permutation(np.unique(groups.astype(str)))
    picked: list[np.ndarray] = []
    taken = 0
    for name in names[:-1]:  # never every group: the script keeps at least one
        if taken >= size:
            break
        rows = np.flatnonzero(groups.astype(str) == name)
        picked.append(rows)
        taken += len(rows)
    return np.sort(np.concatenate(picked)) if picked else np.array([], dtype=int)


def _fresh_ids(selected: pd.Series, taken: set[str]) -> pd.Series:
    """Selection ids that no test row has: their own where they are free, numbers past every id if not."""
    if not {id_key(i) for i in taken} & {id_key(i) for i in selected}:
        return selected
    import pandas as pd

    numeric = [int(i) for i in (*taken, *selected) if i.lstrip("-").isdigit()]
    start = max(numeric, default=0) + 1
    return pd.Series([str(start + k) for k in range(len(selected))], index=selected.index)


def _csv(task: Task) -> Held | None:
    assert task.train_file and task.test_file and task.id_column
    train = _read_text_csv(task.public_dir / task.train_file)
    test = _read_text_csv(task.public_dir / task.test_file)
    idc, labels = task.id_column, list(task.target)
    if not set(test.columns) <= set(train.columns) or not set(labels) <= set(train.columns):
        return None  # the selection rows could not be given the test file's columns
    chosen = _chosen(task, train, labels)
    if chosen is None or not len(chosen[0]):
        return None
    positions, how = chosen
    selected = train.iloc[positions].copy()
    selected[idc] = _fresh_ids(selected[idc], set(test[idc]))
    files: dict[str, Any] = {task.train_file: train.drop(index=train.index[positions]),
                             task.test_file: _appended(test, selected)}
    for name in task.public_files:  # a sample submission lists the test ids: it lists these too
        if name.endswith(".csv") and name not in files and _lists_ids(task.public_dir / name, idc, test):
            files[name] = _appended(_read_text_csv(task.public_dir / name), selected)
    answers = selected[[idc, *labels]].reset_index(drop=True)
    return Held(rows=len(selected), labelled=len(train), how=f"{how} of {task.train_file}",
                test_rows=len(test), answers=answers, files=files, ids=tuple(map(id_key, selected[idc])))


def _appended(frame: pd.DataFrame, selected: pd.DataFrame) -> pd.DataFrame:
    """`frame` with the selection rows after its own, in its columns; a column the selection rows lack
    (a sample submission's guess) takes the first row's value."""
    import pandas as pd

    extra = pd.DataFrame({c: selected[c].to_numpy() if c in selected.columns else frame[c].iloc[0]
                          for c in frame.columns}, index=range(len(selected)))
    return pd.concat([frame, extra], ignore_index=True)


def _lists_ids(path: Path, idc: str, test: pd.DataFrame) -> bool:
    import csv

    with path.open(newline="", encoding="utf-8", errors="replace") as fh:
        if idc not in next(csv.reader(fh), []):
            return False
    ids = _read_text_csv(path)[idc]
    return len(ids) == len(test) and set(ids) == set(test[idc])


def write_files(held: Held, workspace: Path) -> None:
    """The workspace's copies of the files the selection rows change."""
    for name, content in held.files.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, np.ndarray):
            np.save(path, content, allow_pickle=False)
        else:
            content.to_csv(path, index=False)


# -- npy: time-series classification and forecasting windows ----------------------------------------------
def _npy(task: Task) -> Held | None:
    X, y, X_test = (np.load(task.public_dir / n, allow_pickle=False) for n in NPY)
    if len(X) != len(y):
        return None
    if task.task_type == "forecasting":
        split = _forecast_windows(X, y, X_test)
        how = "the latest windows whose targets the script cannot see"
    else:
        size = selection_size(len(y))
        rng = np.random.default_rng(_seed(task))
        positions = _stratified(y, size, rng) if size else np.array([], dtype=int)
        split = (np.setdiff1d(np.arange(len(y)), positions), positions) if len(positions) else None
        how = f"{len(positions)} cases stratified by label"
    if split is None:
        return None
    keep, picked = split
    files = {"X_train.npy": X[keep], "y_train.npy": y[keep], "X_test.npy": np.concatenate([X_test, X[picked]])}
    return Held(rows=len(picked), labelled=len(y), how=f"{how}, from X_train.npy", test_rows=len(X_test),
                answers=y[picked], files=files)


def _rows(a: np.ndarray) -> np.ndarray:
    """Windows as (n, steps, dims): a 2-D array is one dimension."""
    return a[..., None] if a.ndim == 2 else a


def _pairs(a: np.ndarray) -> set[bytes]:
    """Every two consecutive steps of every window, as bytes: a target seen elsewhere shows as a pair."""
    a = np.ascontiguousarray(_rows(a))
    if a.shape[1] < 2:
        return {a[i, 0].tobytes() for i in range(len(a))}
    both = np.ascontiguousarray(np.concatenate([a[:, :-1], a[:, 1:]], axis=2))
    return {row.tobytes() for window in both for row in window}


def _forecast_windows(X: np.ndarray, y: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """From the last training window backwards, a window joins the selection when none of its targets
    shows in the test inputs or in a joined window's inputs (so overlapping windows cannot hand each
    other their answers); the walk covers the latest share of the windows, longer (up to a third) until
    WINDOWS have joined. Windows after the earliest joined one are dropped, and so is any earlier one
    that shares a target with a joined window: the script's data ends before the selection's begins."""
    span, longest = selection_size(len(y)), len(y) // 3
    if span == 0 or _rows(X).shape[2] != _rows(y).shape[2] or _rows(X_test).shape[2] != _rows(y).shape[2]:
        return None  # inputs of other dimensions than the targets: a seen target cannot be recognised
    seen, picked = _pairs(X_test), []
    for walked, j in enumerate(range(len(y) - 1, -1, -1)):
        if walked >= longest or (walked >= span and len(picked) >= WINDOWS):
            break
        if not _pairs(y[j:j + 1]) & seen:
            picked.append(j)
            seen |= _pairs(X[j:j + 1])
    if not picked:
        return None
    secret = _pairs(y[picked])
    keep = [j for j in range(min(picked)) if not (_pairs(y[j:j + 1]) | _pairs(X[j:j + 1])) & secret]
    return np.array(keep, dtype=int), np.array(sorted(picked), dtype=int)


# -- DS-Agent folders: rows of the training csv graded by the folder's own submission.py ------------------
def dsagent_train_file(task: Task) -> str | None:
    """The csv the starter trains on, where the folder has a labelled test file to hold rows back in."""
    grading = task.dsagent
    if grading is None or not grading.label_file:
        return None
    found = training_csv(task.public_dir, grading.label_file, grading.label_columns)
    return found.name if found is not None and found.name in task.public_files else None


def label_constants(train: pd.DataFrame, columns: tuple[str, ...]) -> dict[str, str]:
    """Each label column's most common training value, as text: what the test file's labels become."""
    return {c: str(train[c].mode().iloc[0]) for c in columns if c in train.columns and len(train[c])}


def dsagent_test_file(task: Task) -> pd.DataFrame:
    """A DS-Agent folder's test file as a script sees it without selection rows: the labels constant."""
    grading = task.dsagent
    assert grading is not None and grading.label_file
    train_name = dsagent_train_file(task)
    train = _read_text_csv(task.public_dir / train_name) if train_name else None
    constants = label_constants(train, grading.label_columns) if train is not None else {}
    return hide_labels(_read_text_csv(task.public_dir / grading.label_file), grading.label_columns, constants)


def _dsagent(task: Task) -> Held | None:
    """The rows go to the end of the test file, with their labels hidden as the test's are; the grader
    runs submission.py a second time with a test file of the selection rows, labelled."""
    grading, train_name = task.dsagent, dsagent_train_file(task)
    if grading is None or train_name is None or task.modality == "forecasting":
        return None  # a forecasting folder cuts its windows from one series in the script itself
    assert grading.label_file
    train = _read_text_csv(task.public_dir / train_name)
    test = _read_text_csv(task.public_dir / grading.label_file)
    if not set(test.columns) <= set(train.columns):
        return None
    chosen = _chosen(task, train, list(grading.label_columns))
    if chosen is None or not len(chosen[0]):
        return None
    positions, how = chosen
    selected = train.iloc[positions][list(test.columns)].reset_index(drop=True)
    shown = hide_labels(_appended(test, selected), grading.label_columns, label_constants(train, grading.label_columns))
    files = {train_name: train.drop(index=train.index[positions]), grading.label_file: shown}
    return Held(rows=len(selected), labelled=len(train), how=f"{how} of {train_name}", test_rows=len(test),
                answers=selected, files=files)
