"""Selection rows: labelled rows the harness holds back from every script, as Kaggle's public leaderboard
holds back its labels. The grader, outside the sandbox, scores what a script predicted for them; that
score, the selection score, is what every choice is made on: a script cannot print it, and a model
trained on rows it was not given cannot have seen their labels.

Which rows: a seeded share of the labelled rows (stratified by class where the task classifies; whole
groups where task.toml names a group column; the latest rows where rows are in time, after the script's
own, so that time order holds). Forecasting windows overlap: a selection window is kept only when none
of its targets appears in what the script sees (the test inputs, the other selection inputs), and a
training window that shares a target with one is dropped.

Where the held rows then sit among the test rows, and which ids they carry, is mixing.py's: nothing in
a file's order or ids tells them apart. Every draw is keyed (selection_key.py), so a script cannot redo
it. `hold_out(task)` plans it: an immutable `Held`, the same rows for every run of a task in one cbr
home. What the plan does to the files a script sees is workspace.py's alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cache, cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dsagent_cbr.harness import mixing
from dsagent_cbr.harness.selection_key import task_seed
from dsagent_cbr.tasks.dsagent_layout import training_csv
from dsagent_cbr.tasks.model import Task

if TYPE_CHECKING:
    import pandas as pd

SHARE = 0.2  # of the labelled rows
FLOOR = 100  # rows, when the data can spare them (at most a third)
CAP = 10_000  # rows: past this a larger share only costs the script training rows
# labelled rows below which none can be spared: such a task is chosen on printed validation
FEWEST = 20
NPY = ("X_train.npy", "y_train.npy", "X_test.npy")
WINDOWS = 8  # forecasting: the selection windows sought before the walk stops at the share


def selection_size(labelled: int) -> int:
    if labelled < FEWEST:
        return 0
    return min(max(round(SHARE * labelled), min(FLOOR, labelled // 3)), CAP)


@dataclass(frozen=True)
class Held:
    """One task's selection rows: where they are, and what the grader needs of them afterwards."""

    rows: int
    labelled: int  # the labelled rows the share was taken from
    how: str  # in words, for the data card and the report
    test_rows: int  # the test file's rows; the selection rows' predictions follow theirs
    source: str  # the public file the rows come from: the training csv, or X_train.npy (with y_train.npy)
    positions: tuple[int, ...]  # the held rows' positions in `source`, ascending
    # forecasting: training windows the script loses too (they share a target)
    dropped: tuple[int, ...] = ()
    # csv: each held row's id in the workspace (mixing.py's pool)
    shown_ids: tuple[str, ...] = ()
    # the same as id_key gives them: how the grader finds their predictions
    ids: tuple[str, ...] = ()
    # the workspace's rows of the test file, as source rows (mixing.py); empty: the source order
    order: tuple[int, ...] = ()
    # csv: the test rows' own ids as the test file writes them, and the id each carries in the workspace
    test_ids: tuple[str, ...] = ()
    test_shown: tuple[str, ...] = ()
    # csv: the id and target columns (as text); npy: the y rows; dsagent: the rows, labelled, in the
    # test's columns
    answers: Any = field(default=None, repr=False, compare=False)

    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:
        """Hashed once: a Held keys the caches of the workspace's files and the typed answers, and its
        tuples hold a row or an id for each of a million test rows."""
        return hash(tuple(getattr(self, f.name) for f in fields(self) if f.compare))

    def mix(self, values: np.ndarray) -> np.ndarray:
        return mixing.mix(values, self.order)

    def unmix(self, values: np.ndarray) -> np.ndarray:
        return mixing.unmix(values, self.order)

    def test_places(self, keys: Sequence[str] | pd.Series) -> np.ndarray:
        """csv: where in the test file the row is whose workspace id is each of `keys` (as id_key gives
        them); -1 for an id no test row has. Hashed lookups: mapping a dict over 300,000 ids took 0.3 s,
        and the grader and the upload look them up for every graded node."""
        index, places = self._test_places
        return found_at(places, index.get_indexer(keys), np.full(len(keys), -1))

    @cached_property
    def _test_places(self) -> tuple[pd.Index, np.ndarray]:
        """The test rows' workspace ids as id_key gives them, each once (the last row of one wins), and
        each one's row in the test file."""
        import pandas as pd

        places = {key: k for k, key in enumerate(keys_of(self.test_shown))}
        return pd.Index(list(places), dtype=object), np.fromiter(places.values(), int, len(places))

    @cached_property
    def test_id_keys(self) -> np.ndarray:
        """csv: each test row's own id as id_key gives it, in the test file's order."""
        return np.asarray(keys_of(self.test_ids), dtype=object)

    def for_refit(self) -> Held:
        """What a refit sees: every labelled row to learn, and the test rows where the first fit saw them,
        with no held row among them (it learned them: predicting them would judge nothing)."""
        return replace(
            self,
            rows=0,
            positions=(),
            dropped=(),
            shown_ids=(),
            ids=(),
            order=mixing.without_held(self.order, self.test_rows),
            answers=None,
        )

    def worth(self, metric: str) -> str:
        """What one row moves the score by, where that is a fixed amount."""
        if metric == "accuracy":
            return f"one row is {100 / self.rows:.2g} accuracy points"
        return f"{self.rows} rows"


def found_at(values: np.ndarray, found: np.ndarray, otherwise: np.ndarray) -> np.ndarray:
    """values[k] for each place k of `found` that is one (not -1), and `otherwise`'s element where not."""
    out = otherwise.copy()
    hit = found >= 0
    out[hit] = values[found[hit]]
    return out


def id_key(value: object) -> str:
    """An id as text, so that 7, 7.0, "7" and "7.0" are one id whichever way a file was typed."""
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else text


# an id id_key leaves as it is: a plain integer, the usual id, tested on the whole column at once
PLAIN_ID = r"0|-?[1-9][0-9]{0,14}"


def id_keys(ids: pd.Series) -> pd.Series:
    """id_key of every id in a column; a million ids in a fraction of a second when they are plain
    integers (mapping id_key over them took a second a million)."""
    import pandas as pd

    text = ids.astype(str)
    plain = text.str.fullmatch(PLAIN_ID).fillna(False).to_numpy(dtype=bool)
    if plain.all():
        return text
    keys = text.to_numpy(dtype=object)
    keys[~plain] = [id_key(v) for v in ids.to_numpy(dtype=object)[~plain]]
    return pd.Series(keys, index=ids.index, name=ids.name, dtype=str)


def keys_of(ids: Sequence[object]) -> list[str]:
    """id_key of each of `ids`, at once."""
    import pandas as pd

    return id_keys(pd.Series(ids, dtype=object)).tolist()


def describe(task: Task, held: Held | None) -> str:
    """The selection rows in words, for the data card: how many, where they are in the workspace, what
    one is worth."""
    if held is None:
        return (
            "Selection rows: none (too few labelled rows, or a layout whose rows cbr cannot hold back); "
            "runs are judged by the validation line the script prints."
        )
    where = task.test_file or "X_test.npy"
    among = (
        f"their features follow the {held.test_rows} test rows of {where}"
        if in_time(task)
        else f"their features are among the {held.test_rows} test rows of {where}, in an order and with "
        "ids that say nothing of which rows they are"
    )
    return (
        f"Selection rows: cbr holds back {held.rows} of the {held.labelled} labelled rows ({held.how}); the "
        f"counts above are of the files before it does. In the workspace the training file lacks them and "
        f"{among}: predict every row. cbr grades "
        f"their predictions; that selection score is what a run is judged by ({held.worth(task.metric_name)})."
    )


def in_time(task: Task) -> bool:
    """Whether the task's rows have a time order the held rows must keep: they are then its latest."""
    return bool(task.time_column) or task.task_type == "forecasting"


def _rng(task: Task, stream: int = 0) -> np.random.Generator:
    return np.random.default_rng(task_seed(task.name, stream))


def files_stamp(task: Task) -> tuple[tuple[str, int, int], ...]:
    paths = [task.public_dir / n for n in task.public_files]
    return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in paths if p.is_file())


def hold_out(task: Task) -> Held | None:
    """The task's selection rows, or None where the harness cannot hold rows back (too few labelled
    rows, or a layout whose rows it cannot tell apart: the run is then chosen on printed validation)."""
    if not task.is_prepared():
        return None
    return _hold_out(task, files_stamp(task), task_seed(task.name))


@cache
def _hold_out(task: Task, _stamp: object, _seed: int) -> Held | None:
    if task.data_format in ("npy", "dsagent") and all(n in task.public_files for n in NPY):
        return _npy(task)
    if task.data_format == "csv" and task.train_file and task.test_file and task.id_column:
        return _csv(task)
    if task.data_format == "dsagent":
        return _dsagent(task)
    return None


def read_text_csv(path: Path) -> pd.DataFrame:
    """Every cell as the text it was, so that the files a script reads change by rows and nothing else."""
    return _read_text_csv(str(path), *_file_stamp(path))


def _file_stamp(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size


# the files a task's runs read again and again; a bench of many tasks keeps few at once
@lru_cache(maxsize=8)
def _read_text_csv(path: str, _mtime: int, _size: int) -> pd.DataFrame:
    import pandas as pd

    return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)


def _chosen(task: Task, train: pd.DataFrame, labels: list[str]) -> tuple[np.ndarray, str] | None:
    """Positions of the selection rows in `train`, and how they were chosen."""
    size = selection_size(len(train))
    if size == 0:
        return None
    rng = _rng(task)
    if in_time(task):
        order = np.arange(len(train))
        if task.time_column in train.columns:
            import pandas as pd

            order = np.argsort(
                pd.to_datetime(train[task.time_column], errors="coerce").to_numpy(), kind="stable"
            )
        return np.sort(order[-size:]), f"the latest {size} rows"
    if task.group_column in train.columns:
        return _whole_groups(
            train[task.group_column].to_numpy(), size, rng
        ), f"whole {task.group_column} groups"
    if (
        len(labels) == 1
        and task.task_type.endswith("classification")
        and task.task_type != "multilabel-classification"
    ):
        return _stratified(
            train[labels[0]].to_numpy(), size, rng
        ), f"{size} rows stratified by {labels[0]}"
    return np.sort(rng.choice(len(train), size=size, replace=False)), f"{size} rows drawn at random"


def _stratified(labels: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Each class's share of the selection rows in proportion to its share of the data, at least one
    row of every class with two or more (so that AUROC and log loss are defined on them)."""
    classes, counts = np.unique(labels.astype(str), return_counts=True)
    want = np.floor(counts * size / counts.sum()).astype(int)
    want = np.where(counts >= 2, np.maximum(want, 1), 0)
    for k in np.argsort(-counts)[: max(size - want.sum(), 0)]:
        want[k] += 1 if want[k] < counts[k] - 1 else 0
    picked = [
        rng.choice(np.flatnonzero(labels.astype(str) == c), size=w, replace=False)
        for c, w in zip(classes, want, strict=True)
        if w
    ]
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


def _fresh_ids(selected: pd.Series, taken: set[str]) -> list[str]:
    """Selection ids that no test row has and none repeats: their own where they are free, numbers past
    every id if not."""
    keys = [id_key(i) for i in selected]
    if not set(keys_of(list(taken))) & set(keys) and len(set(keys)) == len(keys):
        return list(selected)
    numeric = [int(i) for i in (*taken, *selected) if i.lstrip("-").isdigit()]
    start = max(numeric, default=0) + 1
    return [str(start + k) for k in range(len(selected))]


def _csv(task: Task) -> Held | None:
    assert task.train_file and task.test_file and task.id_column
    train = read_text_csv(task.public_dir / task.train_file)
    test = read_text_csv(task.public_dir / task.test_file)
    idc, labels = task.id_column, list(task.target)
    if not set(test.columns) <= set(train.columns) or not set(labels) <= set(train.columns):
        return None  # the selection rows could not be given the test file's columns
    chosen = _chosen(task, train, labels)
    if chosen is None or not len(chosen[0]):
        return None
    positions, how = chosen
    rng, timed = _rng(task, mixing.MIX_STREAM), in_time(task)
    order = mixing.draw_order(len(test), len(positions), timed, rng)
    test_ids = test[idc].tolist()  # at once: a million ids one by one took a second
    own = _fresh_ids(train[idc].iloc[positions], set(test_ids))
    test_shown, shown = mixing.pooled_ids(test_ids, own, timed, rng)
    answers = train[labels].iloc[positions].reset_index(drop=True)
    answers.insert(0, idc, shown)
    return Held(
        rows=len(positions),
        labelled=len(train),
        how=f"{how} of {task.train_file}",
        test_rows=len(test),
        source=task.train_file,
        positions=tuple(map(int, positions)),
        shown_ids=tuple(shown),
        ids=tuple(map(id_key, shown)),
        order=order,
        test_ids=tuple(test_ids),
        test_shown=tuple(test_shown),
        answers=answers,
    )


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
        rng = _rng(task)
        positions = _stratified(y, size, rng) if size else np.array([], dtype=int)
        split = (np.setdiff1d(np.arange(len(y)), positions), positions) if len(positions) else None
        how = f"{len(positions)} cases stratified by label"
    if split is None:
        return None
    keep, picked = split
    dropped = np.setdiff1d(np.arange(len(y)), np.concatenate([keep, picked]))
    order = mixing.draw_order(
        len(X_test), len(picked), in_time(task), _rng(task, mixing.MIX_STREAM)
    )
    return Held(
        rows=len(picked),
        labelled=len(y),
        how=f"{how}, from X_train.npy",
        test_rows=len(X_test),
        source="X_train.npy",
        positions=tuple(map(int, picked)),
        dropped=tuple(map(int, dropped)),
        order=order,
        answers=y[picked],
    )


def _rows(a: np.ndarray) -> np.ndarray:
    """Windows as (n, steps, dims): a 2-D array is one dimension."""
    return a[..., None] if a.ndim == 2 else a


def step_pairs(a: np.ndarray) -> set[bytes]:
    """Every two consecutive steps of every window, as bytes: a target seen elsewhere shows as a pair."""
    a = np.ascontiguousarray(_rows(a))
    if a.shape[1] < 2:
        return {a[i, 0].tobytes() for i in range(len(a))}
    both = np.ascontiguousarray(np.concatenate([a[:, :-1], a[:, 1:]], axis=2))
    return {row.tobytes() for window in both for row in window}


def _forecast_windows(
    X: np.ndarray, y: np.ndarray, X_test: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """From the last training window backwards, a window joins the selection when none of its targets
    shows in the test inputs or in a joined window's inputs (so overlapping windows cannot hand each
    other their answers); the walk covers the latest share of the windows, longer (up to a third) until
    WINDOWS have joined. Windows after the earliest joined one are dropped, and so is any earlier one
    that shares a target with a joined window: the script's data ends before the selection's begins."""
    span, longest = selection_size(len(y)), len(y) // 3
    if (
        span == 0
        or _rows(X).shape[2] != _rows(y).shape[2]
        or _rows(X_test).shape[2] != _rows(y).shape[2]
    ):
        # inputs of other dimensions than the targets: a seen target cannot be recognised
        return None
    seen, picked = step_pairs(X_test), []
    for walked, j in enumerate(range(len(y) - 1, -1, -1)):
        if walked >= longest or (walked >= span and len(picked) >= WINDOWS):
            break
        if not step_pairs(y[j : j + 1]) & seen:
            picked.append(j)
            seen |= step_pairs(X[j : j + 1])
    if not picked:
        return None
    secret = step_pairs(y[picked])
    keep = [
        j
        for j in range(min(picked))
        if not (step_pairs(y[j : j + 1]) | step_pairs(X[j : j + 1])) & secret
    ]
    return np.array(keep, dtype=int), np.array(sorted(picked), dtype=int)


# -- DS-Agent folders: rows of the training csv graded by the folder's own submission.py ------------------
def dsagent_train_file(task: Task) -> str | None:
    """The csv the starter trains on, where the folder has a labelled test file to hold rows back in."""
    grading = task.dsagent
    if grading is None or not grading.label_file:
        return None
    found = training_csv(task.public_dir, grading.label_file, grading.label_columns)
    return found.name if found is not None and found.name in task.public_files else None


def _dsagent(task: Task) -> Held | None:
    """The rows go to the end of the test file, with their labels hidden as the test's are; the grader
    runs submission.py a second time with a test file of the selection rows, labelled."""
    grading, train_name = task.dsagent, dsagent_train_file(task)
    if grading is None or train_name is None or task.modality == "forecasting":
        return None  # a forecasting folder cuts its windows from one series in the script itself
    assert grading.label_file
    train = read_text_csv(task.public_dir / train_name)
    test = read_text_csv(task.public_dir / grading.label_file)
    if not set(test.columns) <= set(train.columns):
        return None
    chosen = _chosen(task, train, list(grading.label_columns))
    if chosen is None or not len(chosen[0]):
        return None
    positions, how = chosen
    mixed = _rng(task, mixing.MIX_STREAM)
    return Held(
        rows=len(positions),
        labelled=len(train),
        how=f"{how} of {train_name}",
        test_rows=len(test),
        source=train_name,
        positions=tuple(map(int, positions)),
        order=mixing.draw_order(len(test), len(positions), in_time(task), mixed),
        answers=train.iloc[positions][list(test.columns)].reset_index(drop=True),
    )
