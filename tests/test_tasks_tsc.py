"""The time-series classification tasks: their prepare.py builds arrays that keep the npy contract, and a
reference solution beats the random starter on the private test labels.

Each prepare.py is copied into a temporary folder and run there, so the tests never touch the task
folders in the repository; the scripts run as child processes in their own temporary workspaces.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.task_copies import SOLUTIONS, TASKS, build, run_in_workspace

# What the archive files hold: train cases, test cases, channels, padded length, classes.
EXPECTED = {
    "basic-motions": (40, 40, 6, 100, 4),
    "japanese-vowels": (270, 370, 12, 29, 9),
    "acsf1": (100, 100, 1, 1460, 10),
    "plaid": (537, 537, 1, 1344, 11),
    "pickup-gesture": (50, 50, 1, 361, 10),
}


def run_script(folder: Path, script: Path, workspace: Path) -> tuple[float, float]:
    """Run `script` as train.py on the public files; its validation accuracy and its test accuracy."""
    valid = run_in_workspace(folder, script, workspace, "accuracy")
    predictions = np.load(workspace / "predictions.npy", allow_pickle=False)
    truth = np.load(folder / "private" / "y_test.npy", allow_pickle=False)
    assert predictions.shape == truth.shape
    assert predictions.dtype == truth.dtype
    return valid, float(np.mean(predictions == truth))


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_prepared_arrays_keep_the_npy_contract(name: str, tmp_path: Path) -> None:
    folder = build(name, tmp_path)
    data = folder / "data"
    assert sorted(p.name for p in data.iterdir()) == ["X_test.npy", "X_train.npy", "y_train.npy"]
    assert [p.name for p in (folder / "private").iterdir()] == ["y_test.npy"]
    X, y = np.load(data / "X_train.npy", allow_pickle=False), np.load(data / "y_train.npy", allow_pickle=False)
    X_test = np.load(data / "X_test.npy", allow_pickle=False)
    y_test = np.load(folder / "private" / "y_test.npy", allow_pickle=False)
    n_train, n_test, channels, length, classes = EXPECTED[name]
    assert X.shape == (n_train, channels, length) and X_test.shape == (n_test, channels, length)
    assert y.shape == (n_train,) and y_test.shape == (n_test,)
    assert X.dtype.kind == "f" and y.dtype.kind in "iU" and y_test.dtype == y.dtype
    assert len(np.unique(y)) == classes and set(np.unique(y_test)) <= set(np.unique(y))
    for array in (X, X_test):
        missing = np.isnan(array)
        # NaN only as padding: once a series has ended it stays ended, and no case is empty.
        assert not np.any(missing[:, :, :-1] & ~missing[:, :, 1:])
        assert not missing[:, :, 0].any()
    # A second run rewrites the same bytes: the recipe is deterministic and safe to repeat.
    before = {p.name: p.read_bytes() for p in [*data.iterdir(), *(folder / "private").iterdir()]}
    proc = subprocess.run([sys.executable, "prepare.py"], cwd=folder, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = {p.name: p.read_bytes() for p in [*data.iterdir(), *(folder / "private").iterdir()]}
    assert after == before


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "solution"),
    [
        ("basic-motions", "basic-motions"),
        ("japanese-vowels", "japanese-vowels"),
        # The deployment case: a development reference dropped unchanged into another task's starter.
        ("pickup-gesture", "basic-motions"),
    ],
)
def test_reference_beats_the_random_starter(name: str, solution: str, tmp_path: Path) -> None:
    folder = build(name, tmp_path)
    _, starter_test = run_script(folder, TASKS / name / "train.py", tmp_path / "starter")
    valid, reference_test = run_script(folder, SOLUTIONS / solution / "solution.py", tmp_path / "reference")
    chance = 1 / EXPECTED[name][4]
    assert starter_test < chance + 0.2
    assert reference_test > starter_test + 0.3
    assert valid > chance + 0.3
