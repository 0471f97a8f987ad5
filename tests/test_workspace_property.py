"""What a script may see, proved over every task layout (tests/support/layouts.py): no label of a held
row reaches any file of its workspace, and a script that submits any file it was given scores no
better than a constant guess on the held rows.

The first is tested as a property of the builder: each task is copied with its held rows' labels
changed to values found nowhere else, and the workspace built from the copy must be byte for byte the
workspace built from the task (so it depends on nothing those labels say), and hold none of the new
values. Fast: no script runs; the builder and the grader are called directly."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import prepared
from support.layouts import every_layout, target_columns
from support.task_copies import dsagent_folder

from dsagent_cbr.harness import workspace
from dsagent_cbr.harness.grading import grade, score_npy
from dsagent_cbr.harness.plan import Held, hold_out, id_key
from dsagent_cbr.harness.readers import ArtefactError
from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.model import Task

POISON = 987654.321  # a held label becomes POISON + its position (numbers) or "POISON<position>" (labels)


@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> dict[str, Task]:
    root = tmp_path_factory.mktemp("layouts")
    tasks = every_layout(root)
    concrete = prepared("concrete-strength")
    for two in (False, True):
        name = f"dsagent-{'two' if two else 'one'}-argument-submit"
        tasks[name] = load_task(dsagent_folder(concrete, root / name, two_arguments=two))
    return tasks


LAYOUTS = ["kaggle-sample-regression", "kaggle-sample-probability", "kaggle-sample-labels",
           "kaggle-probability-columns", "kaggle-several-targets", "holdout", "holdout-groups", "holdout-time",
           "labelled-extra-file", "npy-classification", "npy-forecasting", "dsagent-holdout",
           "dsagent-npy-classification", "dsagent-npy-forecasting", "dsagent-one-argument-submit",
           "dsagent-two-argument-submit"]


def test_every_layout_is_covered(layouts):
    assert sorted(layouts) == sorted(LAYOUTS)
    assert all(hold_out(task) is not None for task in layouts.values())


def _poisoned(value: str, position: int) -> str:
    try:
        float(value)
    except ValueError:
        return f"POISON{position}"
    return repr(POISON + position)


def _poison_csv(path: Path, columns: tuple[str, ...], rows: pd.Series) -> None:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    for column in (c for c in columns if c in frame.columns):
        frame.loc[rows, column] = [_poisoned(v, int(i)) for i, v in frame.loc[rows, column].items()]
    frame.to_csv(path, index=False)


def poison(task: Task, held: Held, root: Path) -> Task:
    """A copy of `task` whose held rows carry labels found nowhere else, in every file that labels them."""
    shutil.copytree(task.root, root)
    copy = load_task(root)
    data = copy.public_dir
    if held.source == "X_train.npy":
        y = np.load(data / "y_train.npy")
        changed = y.astype(object) if y.dtype.kind in "US" else y.copy()
        for k in held.positions:
            changed[k] = f"POISON{k}" if y.dtype.kind in "US" else POISON + k
        np.save(data / "y_train.npy", changed.astype(str) if y.dtype.kind in "US" else changed)
        return copy
    columns = target_columns(task)
    train = pd.read_csv(data / held.source, dtype=str, keep_default_na=False)
    rows = pd.Series(False, index=train.index)
    rows.iloc[list(held.positions)] = True
    _poison_csv(data / held.source, columns, rows)
    if task.id_column:  # every other file that labels the held rows by id
        ids = set(map(id_key, train.loc[rows, task.id_column]))
        for name in (n for n in task.public_files if n.endswith(".csv") and n != held.source):
            frame = pd.read_csv(data / name, dtype=str, keep_default_na=False)
            if task.id_column in frame.columns and set(columns) & set(frame.columns):
                _poison_csv(data / name, columns, frame[task.id_column].map(id_key).isin(ids))
    return copy


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _same(name: str, one: bytes, other: bytes | None) -> bool:
    """Equal bytes; arrays equal values (a poisoned copy's labels may be stored wider)."""
    if other is None or not name.endswith(".npy"):
        return one == other
    import io

    first, second = (np.load(io.BytesIO(raw), allow_pickle=False) for raw in (one, other))
    return first.shape == second.shape and bool(np.array_equal(first.astype(str), second.astype(str)))


def _poison_in(name: str, raw: bytes) -> bool:
    if name.endswith(".npy"):
        import io

        array = np.load(io.BytesIO(raw), allow_pickle=False)
        if array.dtype.kind in "US":
            return bool(np.char.startswith(array.astype(str), "POISON").any())
        return bool((np.abs(array - POISON) < 10_000).any())
    return b"POISON" in raw or b"987" + b"654" in raw


@pytest.mark.parametrize("name", LAYOUTS)
def test_no_held_label_reaches_the_workspace(layouts, tmp_path, name):
    task = layouts[name]
    held = hold_out(task)
    assert held is not None
    built = _files(_build(task, held, tmp_path / "from-task"))
    copy = poison(task, held, tmp_path / "poisoned" / task.root.name)
    from_copy = _files(_build(copy, held, tmp_path / "from-poisoned"))
    leaked = [n for n, raw in from_copy.items() if _poison_in(n, raw)]
    assert not leaked, f"held labels reached {leaked}"
    differs = [n for n in built if not _same(n, built[n], from_copy.get(n))]
    assert not differs and built.keys() == from_copy.keys(), f"{differs} depend on the held rows' labels"


def _build(task: Task, held: Held, folder: Path) -> Path:
    workspace.build(task, held, folder, "print('a script')\n")
    return folder


@pytest.mark.parametrize("name", LAYOUTS)
def test_submitting_any_given_file_scores_like_a_guess(layouts, tmp_path, name):
    task = layouts[name]
    held = hold_out(task)
    assert held is not None
    folder = _build(task, held, tmp_path / "workspace")
    guess = best_constant(task, held)
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        score = _as_submission(task, held, path, tmp_path / "submit")
        if score is not None:
            slack = 1e-9 if task.direction == "maximize" else -1e-9  # float noise, in the guess's favour
            assert not task.metric.better(score, guess + slack), (
                f"{path.name} submitted as it is scores {score} on the held rows; a constant guess {guess}")


def _as_submission(task: Task, held: Held, path: Path, folder: Path) -> float | None:
    """The selection score of a workspace file handed in as the predictions, or None when it cannot be
    graded as predictions at all."""
    if isinstance(held.answers, np.ndarray):  # arrays: by position, the held rows after the test rows
        return _array_submission(task, held, path)
    if task.dsagent is not None:  # the label columns a script could pass to submit, as they are in the file
        if path.suffix != ".csv":
            return None
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        columns = [c for c in task.dsagent.label_columns if c in frame.columns]
        if not columns or len(frame) != held.test_rows + held.rows:
            return None
        truth = held.answers[columns].to_numpy()
        return _metric(task, truth, frame[columns].to_numpy()[held.test_rows:])
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    assert task.predictions
    shutil.copyfile(path, folder / task.predictions)
    try:
        return grade(task, folder, held).selection
    except ArtefactError:
        return None


def _array_submission(task: Task, held: Held, path: Path) -> float | None:
    if path.suffix != ".npy":
        return None
    values = np.load(path, allow_pickle=False)
    if len(values) != held.test_rows + held.rows:
        return None
    try:
        return score_npy(task, held.answers, values[held.test_rows:], "selection")
    except ArtefactError:
        return None


def _metric(task: Task, truth: np.ndarray, pred: np.ndarray) -> float | None:
    if task.metric.name != "accuracy":
        try:
            truth, pred = truth.astype(float), pred.astype(float)
        except ValueError:  # labels given as predictions of a number: the grader refuses them too
            return None
    return task.metric.fn(truth[:, 0] if truth.shape[1] == 1 else truth, pred[:, 0] if pred.shape[1] == 1 else pred)


def best_constant(task: Task, held: Held) -> float:
    """The best score any constant prediction gets on the held rows (computed from their own labels, so
    no constant can beat it)."""
    metric = task.metric.name
    if isinstance(held.answers, np.ndarray):
        truth = held.answers.reshape(len(held.answers), -1)
    else:
        columns = list(target_columns(task))
        truth = held.answers[columns].to_numpy()
    if metric == "auroc":
        return 0.5
    if metric == "accuracy":
        values, counts = np.unique(truth.astype(str), return_counts=True)
        return counts.max() / counts.sum()
    if metric == "logloss":
        labels = truth[:, 0].astype(str)
        share = np.array([np.mean(labels == c) for c in task.classes])
        onehot = np.stack([(labels == c).astype(float) for c in task.classes], axis=1)
        return task.metric.fn(onehot, np.tile(share, (len(labels), 1)))
    truth = truth.astype(float)
    guesses = [np.tile(f(truth, axis=0), (len(truth), 1)) for f in (np.mean, np.median)]
    scores = [task.metric.fn(truth[:, 0] if truth.shape[1] == 1 else truth, g[:, 0] if g.shape[1] == 1 else g)
              for g in guesses]
    return min(scores)
