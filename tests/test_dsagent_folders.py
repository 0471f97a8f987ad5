"""DS-Agent-layout folders run as their own scripts are written: the script's test.csv keeps the label
column (one constant, the answers graded outside), so the starters' `drop(['y'], axis=1)`,
`drop(columns=[...])` and `dropna(subset=[...])` work, and `cbr deploy --model none` adapts a solution
into each. Built from real data (tests/support/dsagent_folders.py), run in the real sandbox."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import prepared
from support.dsagent_folders import dsagent_pattern_folder

from dsagent_cbr.agent.deploy import DeployConfig, deploy
from dsagent_cbr.bank import open_bank
from dsagent_cbr.config import load_settings
from dsagent_cbr.harness import workspace
from dsagent_cbr.harness.plan import hold_out
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.tasks.loader import load_task

FOLDERS = [  # (pattern, our task whose data it holds, metric, the research problem's words)
    ("drop-list", "smoke-ban", "accuracy",
     "You are solving this machine learning task of classification: predict whether a person smokes."),
    ("drop-columns", "hotel-rates", "mae",
     "You are solving this machine learning task of regression: predict a hotel booking's average room price."),
    ("dropna-subset", "pbc-status", "accuracy",
     "You are solving this machine learning task of classification: predict a liver patient's status."),
]


def folder_of(tmp_path, pattern: str, name: str, metric: str, words: str):
    return load_task(dsagent_pattern_folder(prepared(name), tmp_path / f"{name}-dsagent", pattern, metric, words))


def test_the_script_sees_the_label_column_as_one_constant(tmp_path):
    task = folder_of(tmp_path, *FOLDERS[2])
    workspace.build(task, hold_out(task), tmp_path / "ws", "print(1)\n")
    shown = pd.read_csv(tmp_path / "ws" / "test.csv")
    train = pd.read_csv(tmp_path / "ws" / "train.csv")  # the rows the script trains on: the constant is theirs
    assert shown["status"].nunique() == 1 and shown["status"].iloc[0] == train["status"].mode().iloc[0]
    assert list(shown.columns) == list(pd.read_csv(task.public_dir / "test.csv").columns)
    assert task.task_type == "multiclass-classification"


def test_two_labels_graded_by_accuracy_are_a_binary_task(tmp_path):
    assert folder_of(tmp_path, *FOLDERS[0]).task_type == "binary-classification"


@pytest.mark.slow
@pytest.mark.parametrize("pattern, name, metric, words", FOLDERS)
def test_the_starter_runs_and_deploy_without_a_model_succeeds(tmp_path, pattern, name, metric, words):
    task = folder_of(tmp_path, pattern, name, metric, words)
    starter = run_script(task, task.starter, run_dir=tmp_path / "starter")
    assert starter.ok, starter.error
    assert starter.test_metric is not None and starter.selection_metric is not None
    settings = load_settings(home=tmp_path / "home", store="faiss")
    record = deploy(task, DeployConfig(policy=SandboxPolicy(timeout=300)), tmp_path / "deploy",
                    open_bank(settings), None, settings.tasks_dir)
    assert record.solved and record.deploy.solved_by == "adapter", record.deploy.adapter_error
    assert task.metric.better(record.best_selection, starter.selection_metric)
