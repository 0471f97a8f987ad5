"""Grade the predictions a script wrote in its workspace against the task's private answers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from dsagent_cbr.tasks.model import Task


class GradingError(Exception):
    """The predictions are missing or malformed; the message says how, for the agent to act on."""


def grade(task: Task, workspace: Path, stdout: str = "") -> float:
    if task.data_format == "printed":
        return _grade_printed(task, stdout)
    assert task.predictions and task.answers
    predictions = workspace / task.predictions
    if not predictions.is_file():
        raise GradingError(f"the script wrote no {task.predictions}")
    answers = task.private_dir / task.answers
    try:
        if task.data_format == "npy":
            return _grade_npy(task, predictions, answers)
        return _grade_csv(task, predictions, answers)
    except (ValueError, TypeError, IndexError) as exc:
        raise GradingError(f"the predictions cannot be scored with {task.metric_name}: {exc}") from exc


def _grade_printed(task: Task, stdout: str) -> float:
    label = re.escape(task.test_pattern or "")
    matches = re.findall(rf"{label}\s*:\s*([-+]?\d*\.?\d+(?:[eE][-+]?\d+)?)", stdout)
    if not matches:
        raise GradingError(f"the output has no line '{task.test_pattern}: <number>'")
    return float(matches[-1])


def _check_finite(values: np.ndarray, what: str) -> None:
    if values.dtype.kind in "fc" and not np.all(np.isfinite(values)):
        raise GradingError(f"{what} contain NaN or infinite values")


def _grade_npy(task: Task, predictions: Path, answers: Path) -> float:
    try:
        pred = np.load(predictions, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise GradingError(f"{task.predictions} is not a readable .npy array ({exc})") from exc
    truth = np.load(answers, allow_pickle=False)
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


def _grade_csv(task: Task, predictions: Path, answers: Path) -> float:
    import pandas as pd

    try:
        sub = pd.read_csv(predictions)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise GradingError(f"{task.predictions} is not a readable CSV ({exc})") from exc
    truth = pd.read_csv(answers)
    idc = task.id_column
    assert idc is not None
    columns = list(task.classes) if task.metric.name == "logloss" else list(task.target)
    missing = [c for c in [idc, *columns] if c not in sub.columns]
    if missing:
        raise GradingError(f"{task.predictions} lacks column(s) {', '.join(missing)}")
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
