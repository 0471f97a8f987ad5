"""The forecasting tasks: prepare.py cuts windows that keep the npy contract (time order, test targets
after every training target, deterministic output), and the development references beat the random
starters on the private answers.

The recipes run on copies in temporary folders, so the task folders in the repository stay untouched;
starter and reference run as child processes, each in a workspace that holds only the public files.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.task_copies import SOLUTIONS, TASKS, build, run_in_workspace

# train windows, test windows, input length, horizon, dims, stride between training windows
SHAPES = {
    "elec-demand": (1157, 145, 96, 48, 3, 12),
    "us-gasoline": (968, 259, 104, 13, 1, 1),
    "taylor-demand": (1421, 127, 336, 48, 1, 2),
    "call-volume": (1832, 231, 169, 24, 1, 12),
    "nyc-weather": (1145, 144, 96, 24, 5, 6),
}


def score(metric: str, truth: np.ndarray, guess: np.ndarray) -> float:
    error = truth.astype(float) - guess.astype(float)
    return float(np.mean(error**2)) if metric == "mse" else float(np.mean(np.abs(error)))


def run_script(folder: Path, script: Path, workspace: Path, metric: str) -> tuple[float, float]:
    """The validation score the script prints and its test score against private/y_test.npy."""
    valid = run_in_workspace(folder, script, workspace, metric)
    predictions = np.load(workspace / "predictions.npy", allow_pickle=False)
    truth = np.load(folder / "private" / "y_test.npy", allow_pickle=False)
    assert predictions.shape == truth.shape and np.all(np.isfinite(predictions))
    return valid, score(metric, truth, predictions)


def contains_block(window: np.ndarray, block: np.ndarray) -> bool:
    span = len(block)
    return any(np.array_equal(window[i:i + span], block) for i in range(len(window) - span + 1))


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_prepared_windows_keep_the_contract(name: str, tmp_path: Path) -> None:
    folder = build(name, tmp_path)
    data, private = folder / "data", folder / "private"
    assert sorted(p.name for p in data.iterdir()) == ["X_test.npy", "X_train.npy", "y_train.npy"]
    assert [p.name for p in private.iterdir()] == ["y_test.npy"]
    X, y = np.load(data / "X_train.npy"), np.load(data / "y_train.npy")
    X_test, y_test = np.load(data / "X_test.npy"), np.load(private / "y_test.npy")
    n_train, n_test, length, horizon, dims, stride = SHAPES[name]
    assert X.shape == (n_train, length, dims) and y.shape == (n_train, horizon, dims)
    assert X_test.shape == (n_test, length, dims) and y_test.shape == (n_test, horizon, dims)
    assert all(np.all(np.isfinite(a)) for a in (X, y, X_test, y_test))
    # Consecutive training windows are the same series shifted by the stride: they are in time order.
    np.testing.assert_array_equal(X[1, :-stride], X[0, stride:])
    # The last training target lies wholly inside the first test input, hence before every test target.
    assert contains_block(X_test[0], y[-1])
    # z-scored with training statistics: the training inputs are roughly centred with unit spread.
    assert np.all(np.abs(X.mean(axis=(0, 1))) < 0.5) and np.all(np.abs(X.std(axis=(0, 1)) - 1) < 0.5)
    before = {p.name: p.read_bytes() for p in [*data.iterdir(), *private.iterdir()]}
    proc = subprocess.run([sys.executable, "prepare.py"], cwd=folder, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert {p.name: p.read_bytes() for p in [*data.iterdir(), *private.iterdir()]} == before


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "solution", "metric"),
    [
        ("elec-demand", "elec-demand", "mse"),
        ("us-gasoline", "us-gasoline", "mae"),
        # Deployment: a development reference run unchanged on a task whose starter shares its main block.
        ("nyc-weather", "elec-demand", "mse"),
    ],
)
def test_reference_beats_random_and_last_value(name: str, solution: str, metric: str, tmp_path: Path) -> None:
    folder = build(name, tmp_path)
    _, starter_test = run_script(folder, TASKS / name / "train.py", tmp_path / "starter", metric)
    valid, reference_test = run_script(folder, SOLUTIONS / solution / "solution.py", tmp_path / "reference", metric)
    X_test = np.load(folder / "data" / "X_test.npy")
    truth = np.load(folder / "private" / "y_test.npy")
    last_value = score(metric, truth, np.repeat(X_test[:, -1:, :], truth.shape[1], axis=1))
    assert reference_test < last_value < starter_test
    assert valid < starter_test
