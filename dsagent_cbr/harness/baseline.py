"""The prior baseline: what one constant learnt from the rows a script trains on scores on the held rows.
The constant is their mean (the median for absolute errors, the mean of log1p for RMSLE), their class
shares (log loss), their most common class (accuracy), or any number (AUROC, where a constant is 0.5).
A model that does not beat it has learnt nothing from the features; a refit is measured against it
(agent/refit.py)."""

from __future__ import annotations

import numpy as np

from dsagent_cbr.harness.grading import score_npy, score_selection
from dsagent_cbr.harness.plan import NPY, Held, read_text_csv
from dsagent_cbr.harness.readers import ArtefactError
from dsagent_cbr.tasks.model import Task

_MEDIAN = ("mae", "medae")


def prior_score(task: Task, held: Held | None) -> float | None:
    """The prior baseline's score on the held rows; None where there are none, or where the labels do
    not make a constant of the metric's kind (a grader that would refuse it refuses the baseline too)."""
    if held is None:
        return None
    try:
        labels = _training_labels(task, held)
        guess = np.tile(_constant(task, labels), (held.rows, 1))
        if isinstance(held.answers, np.ndarray):
            shaped = guess.reshape((held.rows, *held.answers.shape[1:]))
            return score_npy(task, held.answers, shaped, "selection")
        if task.dsagent is not None:
            truth = held.answers[list(task.dsagent.label_columns)].to_numpy()
            return task.metric.fn(*(_one_column(a) for a in _typed(task, truth, guess)))
        return score_selection(task, held, guess, np.arange(held.rows))
    except (ArtefactError, ValueError, TypeError, KeyError, IndexError):
        return None


def _training_labels(task: Task, held: Held) -> np.ndarray:
    """The labels of the rows the script trains on, one column per target."""
    gone = [*held.positions, *held.dropped]
    if held.source == NPY[0]:
        y = np.delete(np.load(task.public_dir / NPY[1], allow_pickle=False), gone, axis=0)
        return y.reshape(len(y), -1)
    columns = list(task.dsagent.label_columns if task.dsagent is not None else task.target)
    train = read_text_csv(task.public_dir / held.source)
    return train.drop(index=train.index[gone])[columns].to_numpy()


def _constant(task: Task, labels: np.ndarray) -> np.ndarray:
    """One row of predictions: the constant of the metric's kind."""
    name = task.metric.name
    if name == "auroc":
        return np.full(labels.shape[1], 0.5)
    if name == "accuracy":
        values, counts = np.unique(labels.astype(str), return_counts=True)
        return np.array([values[counts.argmax()]] * labels.shape[1])
    if name == "logloss":
        text = labels[:, 0].astype(str)
        return np.array([max(np.mean(text == c), 1e-6) for c in task.classes])
    numbers = labels.astype(float)
    if name in _MEDIAN:
        return np.median(numbers, axis=0)
    if name == "rmsle":
        return np.expm1(np.mean(np.log1p(np.clip(numbers, 0, None)), axis=0))
    return numbers.mean(axis=0)


def _typed(task: Task, truth: np.ndarray, guess: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if task.metric.name == "accuracy":
        return truth.astype(str), guess.astype(str)
    return truth.astype(float), guess.astype(float)


def _one_column(a: np.ndarray) -> np.ndarray:
    return a[:, 0] if a.ndim == 2 and a.shape[1] == 1 else a
