"""The tabular tasks: task.toml agrees with itself and with its pairing, prepare.py writes the same
hold-out every time and keeps the answers out of the public files, and on two fast tasks the reference
solution beats the random starter on the private answers.

Everything runs on copies in temporary folders, so the task folders in the repository stay untouched;
starter and reference run as child processes in a workspace that holds only the public files, and
the test score is computed here with scikit-learn, independent of the package's runner and grader.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import log_loss, mean_squared_error
from support.task_copies import SOLUTIONS, TASKS, build, run_in_workspace

DEVELOPMENT = ["concrete-strength", "diamonds-price", "mlc-churn", "pbc-status", "yeast-multilabel"]
DEPLOYMENT = ["hotel-rates", "deliveries-time", "smoke-ban", "titanic-survival"]
MAXIMIZE = {"accuracy", "auroc"}


def task_toml(name: str) -> dict:
    return tomllib.loads((TASKS / name / "task.toml").read_text())


def run_script(folder: Path, script: Path, workspace: Path, metric: str) -> tuple[float, pd.DataFrame]:
    """The validation score the script prints and the submission it writes."""
    return run_in_workspace(folder, script, workspace, metric), pd.read_csv(workspace / "submission.csv")


@pytest.mark.parametrize("name", DEVELOPMENT + DEPLOYMENT)
def test_task_toml_is_consistent(name: str) -> None:
    spec = task_toml(name)
    assert spec["name"] == name and spec["modality"] == "tabular"
    assert spec["direction"] == ("maximize" if spec["metric"] in MAXIMIZE else "minimize")
    assert spec["stage"] == ("development" if name in DEVELOPMENT else "deployment")
    if spec["stage"] == "deployment":
        # A deployment task is paired with development tasks that have a reference to adapt.
        assert spec["paired_with"]
        for partner in spec["paired_with"]:
            assert task_toml(partner)["stage"] == "development"
            assert (SOLUTIONS / partner / "solution.py").is_file()
    assert (spec["metric"] == "logloss") == bool(spec["data"].get("classes"))


def test_suite_covers_the_tabular_metrics() -> None:
    metrics = {task_toml(name)["metric"] for name in DEVELOPMENT + DEPLOYMENT}
    assert {"accuracy", "auroc", "logloss", "rmse", "mae", "medae", "rmsle"} <= metrics


@pytest.mark.integration
@pytest.mark.parametrize("name", ["pbc-status", "titanic-survival", "yeast-multilabel"])
def test_prepare_is_deterministic_and_hides_answers(name: str, tmp_path: Path) -> None:
    spec = task_toml(name)
    folder = build(name, tmp_path)
    first = {p.name: p.read_bytes() for p in [*(folder / "data").iterdir(), *(folder / "private").iterdir()]}
    subprocess.run([sys.executable, "prepare.py"], cwd=folder, check=True, capture_output=True, timeout=300)
    again = {p.name: p.read_bytes() for p in [*(folder / "data").iterdir(), *(folder / "private").iterdir()]}
    assert first == again

    train = pd.read_csv(folder / "data" / "train.csv")
    test = pd.read_csv(folder / "data" / "test.csv")
    answers = pd.read_csv(folder / "private" / "answers.csv")
    targets = spec["data"]["target"]
    assert not set(targets) & set(test.columns)
    assert list(answers.columns) == ["id", *targets]
    assert answers["id"].tolist() == test["id"].tolist()
    assert not set(train["id"]) & set(test["id"])
    # A quarter of the rows are held out.
    assert abs(len(test) / (len(train) + len(test)) - 0.25) < 0.01


@pytest.mark.slow
def test_concrete_reference_beats_starter(tmp_path: Path) -> None:
    folder = build("concrete-strength", tmp_path)
    answers = pd.read_csv(folder / "private" / "answers.csv")

    def test_rmse(submission: pd.DataFrame) -> float:
        merged = answers.merge(submission, on="id", suffixes=("", "_pred"))
        assert len(merged) == len(answers)
        return mean_squared_error(merged["compressive_strength"], merged["compressive_strength_pred"]) ** 0.5

    starter_valid, starter_sub = run_script(folder, TASKS / "concrete-strength" / "train.py", tmp_path / "s", "rmse")
    ref_valid, ref_sub = run_script(folder, SOLUTIONS / "concrete-strength" / "solution.py", tmp_path / "r", "rmse")
    assert ref_valid < starter_valid
    assert test_rmse(ref_sub) < 0.5 * test_rmse(starter_sub)


@pytest.mark.slow
def test_pbc_reference_beats_starter(tmp_path: Path) -> None:
    classes = task_toml("pbc-status")["data"]["classes"]
    folder = build("pbc-status", tmp_path)
    answers = pd.read_csv(folder / "private" / "answers.csv")

    def test_logloss(submission: pd.DataFrame) -> float:
        merged = answers.merge(submission, on="id")
        assert len(merged) == len(answers)
        proba = merged[classes].to_numpy()
        assert np.allclose(proba.sum(axis=1), 1.0, atol=1e-6)
        # Columns are given in the order of `classes`, which is sorted, as log_loss expects.
        assert classes == sorted(classes)
        return log_loss(merged["status"], proba, labels=classes)

    starter_valid, starter_sub = run_script(folder, TASKS / "pbc-status" / "train.py", tmp_path / "s", "logloss")
    ref_valid, ref_sub = run_script(folder, SOLUTIONS / "pbc-status" / "solution.py", tmp_path / "r", "logloss")
    assert ref_valid < starter_valid
    starter_test, ref_test = test_logloss(starter_sub), test_logloss(ref_sub)
    # The reference must beat the uniform guess (log 3), not only the random starter.
    assert ref_test < np.log(3) < starter_test
