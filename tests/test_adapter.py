"""The structural adapter on real pairs from the suite: each adapted script is run and graded."""

from __future__ import annotations

import tomllib

import pytest
from conftest import REPO, prepared

from dsagent_cbr.agent.adapter import AdapterError, CaseSolution, adapt_solution
from dsagent_cbr.runner.run import run_script

PAIRS = [
    ("concrete-strength", "hotel-rates"),           # tabular -> tabular, regression
    ("rotten-tomatoes", "fine-foods-rating"),       # text -> text, accuracy -> AUROC
    ("elec-demand", "taylor-demand"),               # forecasting -> forecasting
    ("basic-motions", "acsf1"),                     # time-series classification
    ("concrete-strength", "mlc-churn"),             # regression -> classification
]


def reference_case(name: str) -> CaseSolution:
    folder = REPO / "casebank" / "solutions" / name
    meta = tomllib.loads((folder / "meta.toml").read_text())
    return CaseSolution((folder / "solution.py").read_text(), meta["modality"], meta["task_type"], meta["metric"], name)


@pytest.mark.slow
@pytest.mark.parametrize("source,target", PAIRS, ids=[f"{s}->{t}" for s, t in PAIRS])
def test_adapted_solution_runs_and_beats_the_starter(source, target, tmp_path):
    task = prepared(target)
    adapted = adapt_solution(reference_case(source), task)
    result = run_script(task, adapted.code, run_dir=tmp_path / "adapted", timeout=300)
    assert result.ok, f"{result.status}: {result.error}\n{result.stderr[-2000:]}"
    starter = run_script(task, task.starter, run_dir=tmp_path / "starter")
    assert task.metric.better(result.test_metric, starter.test_metric), (result.test_metric, starter.test_metric)


def test_regression_case_on_classification_swaps_estimators():
    task = prepared("mlc-churn")
    case = CaseSolution("from lightgbm import LGBMRegressor\n"
                        "def train_model(X_train, y_train, X_valid, y_valid):\n"
                        "    return LGBMRegressor(objective='regression', n_estimators=50).fit(X_train, y_train)\n"
                        "def predict(model, X):\n    return model.predict(X)\n", "tabular", "regression", "rmse")
    adapted = adapt_solution(case, task)
    assert "LGBMClassifier(" in adapted.code and "objective" not in adapted.code.split("_case_train_model")[-1]
    assert any("swapped" in n for n in adapted.notes)


def test_says_plainly_when_it_cannot_apply():
    task = prepared("concrete-strength")
    with pytest.raises(AdapterError, match="text and the task is tabular"):
        adapt_solution(CaseSolution("def train_model(a, b, c, d):\n    pass\ndef predict(m, X):\n    pass\n",
                                    "text", "binary-classification", "accuracy"), task)
    with pytest.raises(AdapterError, match="no predict"):
        adapt_solution(CaseSolution("def train_model(a, b, c, d):\n    pass\n", "tabular", "regression", "rmse"), task)
