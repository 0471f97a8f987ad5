"""Forecasting recipes: a series cut into (input window, horizon) pairs, test targets last in time."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def make_windows(
    series: np.ndarray, first: int, last: int, stride: int, input_length: int, horizon: int
) -> tuple[np.ndarray, np.ndarray]:
    """Windows whose targets start at or after `first` and end at or before `last`, in time order."""
    starts = range(max(first, input_length), last - horizon + 1, stride)
    X = np.stack([series[s - input_length : s] for s in starts])
    y = np.stack([series[s : s + horizon] for s in starts])
    return X.astype(np.float32), y.astype(np.float32)


def build_windows(
    here: Path,
    series: np.ndarray,
    input_length: int,
    horizon: int,
    train_stride: int,
    test_stride: int,
    test_fraction: float = 0.2,
) -> None:
    """data/ and private/ for a forecasting task: the last `test_fraction` of the series holds the test
    targets; every series is z-scored with statistics of the training part only, so MSE is comparable
    across dimensions."""
    split = int(len(series) * (1 - test_fraction))
    mean, std = series[:split].mean(axis=0), series[:split].std(axis=0)
    series = (series - mean) / std
    X_train, y_train = make_windows(series, 0, split, train_stride, input_length, horizon)
    X_test, y_test = make_windows(series, split, len(series), test_stride, input_length, horizon)
    (here / "data").mkdir(exist_ok=True)
    (here / "private").mkdir(exist_ok=True)
    np.save(here / "data" / "X_train.npy", X_train)
    np.save(here / "data" / "y_train.npy", y_train)
    np.save(here / "data" / "X_test.npy", X_test)
    np.save(here / "private" / "y_test.npy", y_test)
