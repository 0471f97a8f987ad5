"""Text tasks: prepare.py builds a csv task that keeps the folder contract and is deterministic, and the
reference solution beats the random starter on the private test answers.

Each prepare.py is copied into a temporary folder and run there, so the tests never touch the task
folders in the repository; the scripts run as child processes in their own temporary workspaces.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score
from support.task_copies import SOLUTIONS, TASKS, build, run_in_workspace


def run_script(folder: Path, script: Path, workspace: Path, metric: str) -> tuple[float, pd.DataFrame]:
    """Run `script` as train.py on the public files; its printed validation score and its submission."""
    return run_in_workspace(folder, script, workspace, metric), pd.read_csv(workspace / "submission.csv")


def mcrmse(truth: pd.DataFrame, guess: pd.DataFrame, targets: list[str]) -> float:
    errors = truth[targets].to_numpy(float) - guess[targets].to_numpy(float)
    return float(np.mean(np.sqrt(np.mean(errors**2, axis=0))))


def check_layout(name: str, folder: Path) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    spec = tomllib.loads((TASKS / name / "task.toml").read_text())
    data = spec["data"]
    assert spec["modality"] == "text"
    assert sorted(p.name for p in (folder / "data").iterdir()) == sorted(data["public"])
    assert [p.name for p in (folder / "private").iterdir()] == [data["answers"]]
    train = pd.read_csv(folder / "data" / "train.csv")
    test = pd.read_csv(folder / "data" / "test.csv")
    answers = pd.read_csv(folder / "private" / data["answers"])
    assert list(train.columns) == ["id", "text", *data["target"]]
    assert list(test.columns) == ["id", "text"] and list(answers.columns) == ["id", *data["target"]]
    assert train["text"].notna().all() and test["text"].notna().all()
    assert answers["id"].tolist() == test["id"].tolist()
    assert set(train["id"]).isdisjoint(test["id"])
    # The suite holds out a quarter of the rows for grading.
    assert abs(len(test) / (len(test) + len(train)) - 0.25) < 0.01
    return spec, train, answers


@pytest.mark.slow
def test_bbc_news_reference_beats_starter(tmp_path: Path) -> None:
    folder = build("bbc-news", tmp_path)
    _, train, answers = check_layout("bbc-news", folder)
    assert sorted(train["category"].unique()) == ["business", "entertainment", "politics", "sports", "tech"]
    before = {p.name: p.read_bytes() for p in [*(folder / "data").iterdir(), *(folder / "private").iterdir()]}
    subprocess.run([sys.executable, "prepare.py"], cwd=folder, check=True, capture_output=True, timeout=300)
    after = {p.name: p.read_bytes() for p in [*(folder / "data").iterdir(), *(folder / "private").iterdir()]}
    assert before == after

    _, starter = run_script(folder, TASKS / "bbc-news" / "train.py", tmp_path / "starter", "accuracy")
    valid, reference = run_script(
        folder, SOLUTIONS / "bbc-news" / "solution.py", tmp_path / "ref", "accuracy"
    )
    assert starter["id"].tolist() == answers["id"].tolist() == reference["id"].tolist()
    starter_score = accuracy_score(answers["category"], starter["category"])
    reference_score = accuracy_score(answers["category"], reference["category"])
    assert starter_score < 0.4  # five classes guessed at random
    assert reference_score > 0.9 and valid > 0.9
    assert reference_score > starter_score + 0.3


@pytest.mark.slow
def test_movie_snippets_reference_beats_starter(tmp_path: Path) -> None:
    folder = build("movie-snippets-sentiment", tmp_path)
    spec, train, answers = check_layout("movie-snippets-sentiment", folder)
    targets = spec["data"]["target"]
    assert spec["metric"] == "mcrmse" and targets == ["sentiment_mean", "sentiment_sd"]
    # Ratings live on the paper's -4..+4 scale; a spread is never negative.
    assert train["sentiment_mean"].between(-4, 4).all() and (train["sentiment_sd"] >= 0).all()

    _, starter = run_script(folder, TASKS / "movie-snippets-sentiment" / "train.py", tmp_path / "s", "mcrmse")
    valid, reference = run_script(
        folder, SOLUTIONS / "movie-snippets-sentiment" / "solution.py", tmp_path / "r", "mcrmse"
    )
    starter_score = mcrmse(answers, starter, targets)
    reference_score = mcrmse(answers, reference, targets)
    # Predicting the training means everywhere is the bar a real model has to clear, not just the random guess.
    constant = pd.DataFrame({t: np.full(len(answers), train[t].mean()) for t in targets})
    assert reference_score < mcrmse(answers, constant, targets) - 0.1
    assert reference_score < starter_score / 2 and valid < starter_score / 2


@pytest.mark.integration
def test_vader_prepare_names_the_download_command_when_the_sdist_is_missing(tmp_path: Path) -> None:
    folder = tmp_path / "tweet-sentiment"
    folder.mkdir()
    shutil.copy2(TASKS / "tweet-sentiment" / "prepare.py", folder / "prepare.py")
    env = {"PATH": "/usr/bin:/bin", "CBR_SDIST_DIR": str(tmp_path / "empty"), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "prepare.py"], cwd=folder, capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode != 0
    assert "pip download --no-deps --no-binary :all: vaderSentiment==3.3.2" in proc.stderr
    assert not (folder / "data").exists() and not (folder / "private").exists()
