"""Rows tell nothing: a script that looks at no feature, only at the ids and the order of the rows it is
given, scores at chance on the selection rows (and on a `--holdout` test set), whatever the layout, on
files whose order carries the label: a training file sorted by its label, and rows in time order with no
declared time column. Before the held rows were mixed among the test rows (harness/mixing.py) such a
script read each held row's label off its neighbours: selection accuracy 1.0 on a label-sorted file.

The scripts are played here, not sandboxed: they read the workspace as a script would and their
predictions are graded as the grader grades them. Fast: no script runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support.ordered_layouts import LAYOUTS, ROWS, every_ordered_layout

from dsagent_cbr.harness import workspace
from dsagent_cbr.harness.grading import grade, score_npy
from dsagent_cbr.harness.plan import Held, hold_out
from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.model import Task


@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> dict[str, Task]:
    return every_ordered_layout(tmp_path_factory.mktemp("row-order"))



# -- the scripts: each reads ids and row order only ----------------------------------------------------
def by_id(train_ids: np.ndarray, labels: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Each row gets the label of the training row whose id is nearest its own (a row missing from a
    sorted training file sits between rows of its own label)."""
    order = np.argsort(train_ids)
    at = np.clip(np.searchsorted(train_ids[order], ids), 0, len(order) - 1)
    return labels[order][at]


def by_place(labels: np.ndarray, rows: int, after: int) -> np.ndarray:
    """The rows past the first `after` (where the held rows once were, in training-file order) get the
    label at the same share of the way through the training file; the others its first label."""
    guess = np.repeat(labels[:1], rows)
    tail = np.arange(after, rows)
    if len(tail):
        guess[tail] = labels[((tail - after) * len(labels)) // len(tail)]
    return guess


def _files(task: Task, folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, str, str]:
    if task.dsagent is not None:
        labels = task.dsagent.label_columns[0]
        return (pd.read_csv(folder / "train.csv"), pd.read_csv(folder / task.dsagent.label_file), "", labels)
    return pd.read_csv(folder / task.train_file), pd.read_csv(folder / task.test_file), task.id_column, task.target[0]


def guesses(task: Task, held: Held, folder: Path) -> dict[str, np.ndarray]:
    """Each script's predictions of the workspace's test-file rows, in that file's order."""
    if task.data_format == "npy":
        y = np.load(folder / "y_train.npy")
        return {"by place": by_place(y, len(np.load(folder / "X_test.npy")), held.test_rows)}
    train, test, idc, target = _files(task, folder)
    made = {"by place": by_place(train[target].to_numpy(), len(test), held.test_rows)}
    if idc:
        made["by id"] = by_id(train[idc].to_numpy(), train[target].to_numpy(), test[idc].to_numpy())
    if (folder / "details.csv").is_file():  # a row's place in a file in the ids' order names its own id
        place = {v: k for k, v in enumerate(pd.read_csv(folder / "details.csv")[idc])}
        made["by place in details.csv"] = by_id(
            train[idc].to_numpy(), train[target].to_numpy(), test[idc].map(place).to_numpy())
    return made


def scores(task: Task, held: Held, folder: Path, guess: np.ndarray) -> tuple[float | None, float | None]:
    """(selection, test) scores of `guess` as the grader gives them (a DS-Agent folder's metric is taken as
    ours: its grader scores the same rows)."""
    if task.data_format == "csv" and task.dsagent is None:
        _, test, idc, target = _files(task, folder)
        pd.DataFrame({idc: test[idc], target: guess}).to_csv(folder / task.predictions, index=False)
        graded = grade(task, folder, held)
        return graded.selection, graded.test
    source = held.unmix(guess)
    if task.data_format == "npy":
        return score_npy(task, held.answers, source[held.test_rows:], "selection"), None
    truth = held.answers[task.dsagent.label_columns[0]].to_numpy()
    return _metric_of(task, truth, source[held.test_rows:]), None


def _metric_of(task: Task, truth: np.ndarray, pred: np.ndarray) -> float:
    if task.metric.name == "accuracy":
        return task.metric.fn(truth.astype(str), pred.astype(str))
    return task.metric.fn(truth.astype(float), pred.astype(float))


def chance(task: Task, truth: np.ndarray) -> tuple[float, float]:
    """The best constant's score on `truth`, and how far above it (below, for errors) a guess may come by
    luck: three standard errors."""
    if task.metric.name == "accuracy":
        share = max(np.mean(truth.astype(str) == c) for c in np.unique(truth.astype(str)))
        return share, 3 * np.sqrt(share * (1 - share) / len(truth))
    spread = float(np.std(truth.astype(float)))
    return spread, 3 * spread / np.sqrt(len(truth))


def _held_truth(task: Task, held: Held) -> np.ndarray:
    if isinstance(held.answers, np.ndarray):
        return held.answers
    column = task.dsagent.label_columns[0] if task.dsagent is not None else task.target[0]
    return held.answers[column].to_numpy()


def _no_better_than_chance(task: Task, score: float, truth: np.ndarray, what: str) -> None:
    best, luck = chance(task, truth)
    if task.direction == "maximize":
        assert score <= best + luck, f"{what}: {score:.3f} against a constant's {best:.3f}"
    else:
        assert score >= best - luck, f"{what}: {score:.3f} against a constant's {best:.3f}"


@pytest.mark.parametrize("name", LAYOUTS)
def test_ids_and_row_order_score_at_chance_on_the_selection_rows(layouts, tmp_path, name):
    task = layouts[name]
    held = hold_out(task)
    assert held is not None and held.rows >= 400
    workspace.build(task, held, tmp_path, "print('a script')\n")
    for script, guess in guesses(task, held, tmp_path).items():
        selection, _ = scores(task, held, tmp_path, guess)
        _no_better_than_chance(task, selection, _held_truth(task, held), f"{name}, {script}, selection rows")


@pytest.mark.parametrize("kind", ["sorted", "time-ordered"])
def test_ids_and_row_order_score_at_chance_on_a_holdout_test_set(layouts, tmp_path, kind):
    task = layouts[f"{kind}-holdout"]
    held = hold_out(task)
    workspace.build(task, held, tmp_path, "print('a script')\n")
    truth = pd.read_csv(task.private_dir / task.answers)[task.target[0]].to_numpy()
    for script, guess in guesses(task, held, tmp_path).items():
        _, test = scores(task, held, tmp_path, guess)
        _no_better_than_chance(task, test, truth, f"{kind} --holdout, {script}, test rows")


def test_with_a_declared_time_the_held_rows_are_the_latest_and_follow_the_test_rows(layouts, tmp_path):
    task = layouts["time-ordered-kaggle"]
    toml = task.root / "task.toml"
    toml.write_text(toml.read_text().replace("[data]\n", '[data]\ntime_column = "day"\n'))
    timed = load_task(task.root)
    held = hold_out(timed)
    assert held.positions == tuple(range(ROWS - held.rows, ROWS))  # the latest rows
    workspace.build(timed, held, tmp_path, "print('a script')\n")
    test = pd.read_csv(tmp_path / timed.test_file)
    given = pd.read_csv(timed.public_dir / timed.test_file)
    assert test["id"].head(len(given)).tolist() == given["id"].tolist()  # the test rows keep their order
    assert test["id"].tail(held.rows).tolist() == list(range(ROWS - held.rows, ROWS))  # their own ids, in time
