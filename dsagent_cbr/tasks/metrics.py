"""Metrics the tasks are graded with, each with its direction. Pure functions of arrays."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Metric:
    name: str
    direction: str  # "maximize" | "minimize"
    fn: Callable[[np.ndarray, np.ndarray], float]
    needs_probabilities: bool = False
    high: float = float("inf")  # every metric here is at least 0; the shares are at most 1

    def possible(self, value: float) -> bool:
        """Can this metric take the value at all (NaN, infinity and -1e300 cannot be an RMSE)?"""
        return bool(np.isfinite(value)) and 0.0 <= value <= self.high

    @property
    def range(self) -> str:
        return f"[0, {self.high:g}]" if np.isfinite(self.high) else "[0, inf)"

    def better(self, a: float | None, b: float | None) -> bool:
        """Is score a strictly better than score b (None is worst)?"""
        if a is None or not np.isfinite(a):
            return False
        if b is None or not np.isfinite(b):
            return True
        return a > b if self.direction == "maximize" else a < b


def _as_float(y: np.ndarray) -> np.ndarray:
    return np.asarray(y, dtype=float)


def accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.dtype.kind in "fiu" and y_pred.dtype.kind in "fiu":
        return float(np.mean(np.isclose(y_true.astype(float), y_pred.astype(float))))
    return float(np.mean(y_true.astype(str) == y_pred.astype(str)))


def auroc(y_true: np.ndarray, y_score: np.ndarray) -> float:
    """Binary AUROC, or the mean over columns for multi-label (2-D) targets."""
    from sklearn.metrics import roc_auc_score

    y_true, y_score = _as_float(y_true), _as_float(y_score)
    if y_true.ndim == 1 or y_true.shape[1] == 1:
        return float(roc_auc_score(y_true.ravel(), y_score.ravel()))
    scores = [
        roc_auc_score(y_true[:, j], y_score[:, j])
        for j in range(y_true.shape[1])
        if len(np.unique(y_true[:, j])) == 2
    ]
    return float(np.mean(scores))


def logloss(y_onehot: np.ndarray, proba: np.ndarray) -> float:
    """Multi-class log loss; probabilities are clipped and renormalised as Kaggle does."""
    y, p = _as_float(y_onehot), np.clip(_as_float(proba), 1e-15, 1 - 1e-15)
    if y.ndim == 1:
        y, p = np.stack([1 - y, y], axis=1), np.stack([1 - p, p], axis=1)
    p = p / p.sum(axis=1, keepdims=True)
    return float(-np.mean(np.sum(y * np.log(p), axis=1)))


def mse(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean((_as_float(y) - _as_float(p)) ** 2))


def rmse(y: np.ndarray, p: np.ndarray) -> float:
    return mse(y, p) ** 0.5


def mae(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean(np.abs(_as_float(y) - _as_float(p))))


def medae(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.median(np.abs(_as_float(y) - _as_float(p))))


def rmsle(y: np.ndarray, p: np.ndarray) -> float:
    y, p = _as_float(y), _as_float(p)
    if (y < 0).any() or (p <= -1).any():
        raise ValueError("RMSLE needs non-negative targets and predictions above -1")
    return float(np.sqrt(np.mean((np.log1p(p) - np.log1p(y)) ** 2)))


def mcrmse(y: np.ndarray, p: np.ndarray) -> float:
    """Mean over target columns of each column's RMSE (Feedback Prize ELL)."""
    y, p = _as_float(y), _as_float(p)
    if y.ndim == 1:
        return rmse(y, p)
    return float(np.mean(np.sqrt(np.mean((y - p) ** 2, axis=0))))


METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        Metric("accuracy", "maximize", accuracy, high=1.0),
        Metric("auroc", "maximize", auroc, needs_probabilities=True, high=1.0),
        Metric("logloss", "minimize", logloss, needs_probabilities=True),
        Metric("rmse", "minimize", rmse),
        Metric("mse", "minimize", mse),
        Metric("mae", "minimize", mae),
        Metric("medae", "minimize", medae),
        Metric("rmsle", "minimize", rmsle),
        Metric("mcrmse", "minimize", mcrmse),
    ]
}
ALIASES = {
    "nll": "logloss",
    "log_loss": "logloss",
    "roc_auc": "auroc",
    "auc": "auroc",
    "acc": "accuracy",
    "rocauc": "auroc",
    "crossentropy": "logloss",
    "rootmeansquarederror": "rmse",
    "meansquarederror": "mse",
    "meanabsoluteerror": "mae",
    "medianabsoluteerror": "medae",
    "rootmeansquaredlogerror": "rmsle",
    "meancolumnwiserootmeansquarederror": "mcrmse",
}


def _squash(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def names_metric(text: str, metric: str) -> bool:
    """Does `text` (as a script prints it: "RMSE", "roc auc", "log_loss") name this metric?"""
    key = _squash(text)
    return ALIASES.get(key, key) == get_metric(metric).name


def get_metric(name: str) -> Metric:
    key = ALIASES.get(name.lower(), ALIASES.get(_squash(name), name.lower()))
    if key not in METRICS:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(sorted(METRICS))}")
    return METRICS[key]
