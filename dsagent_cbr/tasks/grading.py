"""Grade the predictions a script wrote in its workspace against the task's private answers. The file
is an artefact like any other a script leaves: read and parsed by runner/artefacts.py, regular files
only, its shape checked against what the task expects before it is parsed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dsagent_cbr.runner.artefacts import ArtefactError, read_bytes, read_csv, read_npy
from dsagent_cbr.tasks.model import Task

EXTRA_COLUMNS = 64  # a submission may carry columns the grader does not read, but not without bound


class GradingError(ArtefactError):
    """The predictions are missing or malformed; the message says how, for the agent to act on."""


def grade(task: Task, workspace: Path) -> float | None:
    """The test score of the predictions in `workspace`, or None for a task without answers (then only
    the predictions' form is checked: a submission must still be one a user can upload)."""
    assert task.predictions and task.data_format in ("csv", "npy")
    raw = read_bytes(workspace, task.predictions)
    try:
        if task.data_format == "npy":
            return _grade_npy(task, raw)
        return _grade_csv(task, raw)
    except (ValueError, TypeError, IndexError) as exc:
        raise GradingError(f"the predictions cannot be scored with {task.metric_name}: {exc}") from exc


def _check_finite(values: np.ndarray, what: str) -> None:
    if values.dtype.kind in "fc" and not np.all(np.isfinite(values)):
        raise GradingError(f"{what} contain NaN or infinite values")


def _grade_npy(task: Task, raw: bytes) -> float | None:
    assert task.predictions
    if task.answers is None:
        pred = read_npy(raw, task.predictions, max_items=len(raw))
        if pred.size == 0:
            raise GradingError(f"{task.predictions} is empty")
        return None
    truth = np.load(task.private_dir / task.answers, allow_pickle=False)
    pred = read_npy(raw, task.predictions, max_items=truth.size)
    if pred.shape != truth.shape:
        if pred.size == truth.size and pred.squeeze().shape == truth.squeeze().shape:
            pred = pred.reshape(truth.shape)
        else:
            raise GradingError(f"predictions have shape {pred.shape}, expected {truth.shape}")
    if task.metric.name != "accuracy":
        try:
            pred = pred.astype(float)
        except ValueError as exc:
            raise GradingError(f"predictions are not numeric ({exc})") from exc
        _check_finite(pred, "predictions")
    return task.metric.fn(truth, pred)


def _grade_csv(task: Task, raw: bytes) -> float | None:
    import pandas as pd

    assert task.predictions
    if task.answers is not None:
        truth = pd.read_csv(task.private_dir / task.answers)
    elif task.test_file and task.id_column:  # no answers: the ids still have to be the test file's
        truth = pd.read_csv(task.public_dir / task.test_file, usecols=[task.id_column])
    else:
        raise GradingError("the task names neither answers nor a test file to check the predictions against")
    idc = task.id_column
    assert idc is not None
    columns = list(task.classes) if task.metric.name == "logloss" else list(task.target)
    wanted = list(dict.fromkeys([idc, *columns]))
    sub = read_csv(raw, task.predictions, wanted=wanted, max_rows=len(truth),
                   max_columns=len(wanted) + EXTRA_COLUMNS)
    if sub[idc].duplicated().any():
        raise GradingError(f"{task.predictions} repeats ids")
    merged = truth.merge(sub[[idc, *columns]], on=idc, how="left", suffixes=("", "__pred"), indicator=True)
    absent = int((merged["_merge"] != "both").sum())
    if absent:
        raise GradingError(f"{task.predictions} has no prediction for {absent} of {len(truth)} test ids")
    if len(sub) != len(truth):
        raise GradingError(f"{task.predictions} has {len(sub)} rows, expected {len(truth)}")

    pred_cols = [c if c not in truth.columns else f"{c}__pred" for c in columns]
    pred = merged[pred_cols].to_numpy()
    if task.answers is None:
        if task.metric.name != "accuracy":
            _numeric(pred)
        elif merged[pred_cols].isna().any().any():
            raise GradingError(f"{task.predictions} has empty predictions")
        return None
    if task.metric.name == "logloss":
        labels = merged[task.target[0]].astype(str).to_numpy()
        y = np.stack([(labels == c).astype(float) for c in task.classes], axis=1)
        pred = _numeric(pred)
        return task.metric.fn(y, pred)
    y = merged[list(task.target)].to_numpy()
    if task.metric.name == "auroc" and y.dtype.kind not in "biuf":
        y = _positive_indicator(task, y)
    if len(task.target) == 1:
        y, pred = y[:, 0], pred[:, 0]
    if task.metric.name != "accuracy":
        pred, y = _numeric(pred), y.astype(float)
    return task.metric.fn(y, pred)


_POSITIVE_WORDS = ("yes", "true", "1", "positive")


def _positive_indicator(task: Task, y: np.ndarray) -> np.ndarray:
    """AUROC answers given as labels: the positive class is classes[-1], or an unambiguous yes/true."""
    labels = {str(v) for v in np.unique(y.astype(str))}
    if task.classes:
        positive = task.classes[-1]
    else:
        matches = [w for w in _POSITIVE_WORDS if w in {lbl.lower() for lbl in labels}]
        if len(labels) != 2 or not matches:
            raise GradingError("AUROC answers must be 0/1, or task.toml must give data.classes = [negative, positive]")
        positive = next(lbl for lbl in labels if lbl.lower() == matches[0])
    return (y.astype(str) == positive).astype(float)


def _numeric(values: np.ndarray) -> np.ndarray:
    try:
        out = values.astype(float)
    except (TypeError, ValueError) as exc:
        raise GradingError(f"predictions are not numeric ({exc})") from exc
    _check_finite(out, "predictions")
    return out
