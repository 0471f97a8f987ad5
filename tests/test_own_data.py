"""From a folder of CSVs to a submission, as a user with their own data goes: real datasets that no task
in tasks/ uses, shaped as Kaggle folders with an unlabelled test.csv, through `cbr tasks new`,
`cbr deploy --model none`, `cbr develop --model none -T 2` and `cbr predict`, all by the real command.
With a labelled hold-out the same folders are graded, and must beat the random starter (shown with
deploy, one sandboxed run; develop's no-model iterations are the same adaptations, chosen by validation)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dsagent_cbr.tasks.recipes.kaggle_folders import FEEDBACK_SCORES, FOLDERS

CBR = [sys.executable, "-m", "dsagent_cbr.cli"]
IDS = {"credit": "id", "debates": "id", "feedback": "text_id"}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """One bank for the module (built on first use from casebank/), so it is embedded once."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def kaggle(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kaggle")
    return {name: make(root / name) for name, make in FOLDERS.items()}


def cbr(home: Path, *args: str | Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "CBR_HOME": str(home)}
    proc = subprocess.run([*CBR, *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc


def agent(home: Path, command: str, task: Path, runs: Path, *extra: str) -> dict:
    proc = cbr(home, command, task, "--model", "none", "--store", "faiss", "--runs-dir", runs, "--timeout", "300",
               "--json", *extra)
    return json.loads(proc.stdout)


def assert_sample_format(submission: Path, sample: Path, idc: str) -> pd.DataFrame:
    """The uploadable file: sample_submission's columns, its ids, in its row order, no empty cell."""
    sub, want = pd.read_csv(submission), pd.read_csv(sample)
    assert list(sub.columns) == list(want.columns)
    assert sub[idc].tolist() == want[idc].tolist()
    assert not sub.isna().any().any()
    return sub


@pytest.mark.slow
@pytest.mark.parametrize("name", ["credit", "debates"])
def test_kaggle_folder_to_submission_and_predict(name, home, kaggle, tmp_path):
    task = tmp_path / "tasks" / name
    cbr(home, "tasks", "new", task, "--from-kaggle-folder", kaggle[name])
    sample = kaggle[name] / "sample_submission.csv"

    deployed = agent(home, "deploy", task, tmp_path / "runs")
    assert deployed["solved"] and deployed["best_valid"] is not None and deployed["best_test"] is None
    deploy_dir = Path(deployed["run_dir"])
    assert_sample_format(deploy_dir / "submission.csv", sample, IDS[name])

    developed = agent(home, "develop", task, tmp_path / "runs", "-T", "2")
    # the search's pick may be its ensemble, which prints no validation of its own: its selection score judges it
    assert developed["best_selection"] is not None and developed["best_test"] is None
    develop_dir = Path(developed["run_dir"])
    assert_sample_format(develop_dir / "submission.csv", sample, IDS[name])

    # cbr predict on rows the run already scored gives the run's predictions for them.
    rows = pd.read_csv(kaggle[name] / "test.csv").iloc[::7].head(40)
    rows.to_csv(tmp_path / "again.csv", index=False)
    proc = cbr(home, "predict", develop_dir, tmp_path / "again.csv", "-o", tmp_path / "again-predictions.csv")
    assert str(tmp_path / "again-predictions.csv") in proc.stdout
    again = pd.read_csv(tmp_path / "again-predictions.csv")
    scored = pd.read_csv(develop_dir / "submission.csv")
    assert list(again.columns) == list(scored.columns) and again["id"].tolist() == rows["id"].tolist()
    before = scored.set_index("id").loc[rows["id"]].reset_index()
    target = again.columns[1]
    if again[target].dtype.kind == "f":
        np.testing.assert_allclose(again[target].to_numpy(), before[target].to_numpy(), rtol=1e-9, atol=1e-12)
    else:
        assert again[target].tolist() == before[target].tolist()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["credit", "debates"])
def test_holdout_is_graded_and_beats_the_random_starter(name, home, kaggle, tmp_path):
    task = tmp_path / "tasks" / name
    cbr(home, "tasks", "new", task, "--from-kaggle-folder", kaggle[name], "--holdout", "0.2")
    starter = json.loads(cbr(home, "run", task, task / "train.py", "--out", tmp_path / "starter", "--json").stdout)
    assert starter["ok"] and starter["test_metric"] is not None

    deployed = agent(home, "deploy", task, tmp_path / "runs")
    # Both metrics here are higher-is-better: AUROC (credit) and accuracy (debates).
    assert deployed["best_test"] is not None and deployed["best_test"] > starter["test_metric"] + 0.1
    answers = pd.read_csv(task / "private" / "answers.csv")
    submission = pd.read_csv(Path(deployed["run_dir"]) / "submission.csv")
    assert submission["id"].tolist() == answers["id"].tolist()


@pytest.mark.slow
def test_feedback_folder_is_a_multi_target_text_regression(home, kaggle, tmp_path):
    """The README's first example: `cbr tasks new tasks/feedback --from-kaggle-folder ...`, then
    `cbr develop tasks/feedback/`."""
    task = tmp_path / "tasks" / "feedback"
    proc = cbr(home, "tasks", "new", task, "--from-kaggle-folder", kaggle["feedback"])
    assert "text: `full_text` is free text" in proc.stdout
    assert "regression (6 numeric target columns)" in proc.stdout and "mcrmse" in proc.stdout
    developed = agent(home, "develop", f"{task}/", tmp_path / "runs", "-T", "2")
    submission = assert_sample_format(Path(developed["run_dir"]) / "submission.csv",
                                      kaggle["feedback"] / "sample_submission.csv", "text_id")
    assert list(submission.columns) == ["text_id", *FEEDBACK_SCORES]
    assert submission[FEEDBACK_SCORES].std().min() > 0  # a model's predictions, not a constant
