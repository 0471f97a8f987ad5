"""benchmarks/suite.py's table from trial rows, without running a grid: cbr's ratio to each anchor (above 1
when cbr did better, whichever way the metric points), each set against what learned the same rows, and an
anchor that did not run told apart from one that ended with no score."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from support.scripts import load_script

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def suite():
    return load_script(REPO / "benchmarks" / "suite.py")


def _trial(task: str, agent: str, test: float | None, direction: str = "maximize", **more) -> dict:
    return {"budget": "1m", "task": task, "agent": agent, "trial": 0, "metric": "auroc", "direction": direction,
            "test": test, "wall_over_budget": 0.9, "outcome": "ok", "commit": "abc1234", **more}


def test_ratios_point_the_metric_s_way_and_set_each_anchor_against_what_learned_its_rows(suite):
    rows = [_trial("a", "cbr", 0.88, submitted=0.90), _trial("a", "flaml", 0.80),
            {"task": "a", "agent": "lightgbm", "test": 0.90, "metric": "auroc", "direction": "maximize"},
            _trial("b", "cbr", 2.0, "minimize", submitted=2.0), _trial("b", "flaml", 4.0, "minimize"),
            {"task": "b", "agent": "lightgbm", "test": 1.0, "metric": "mae", "direction": "minimize"}]
    frame = suite.cells(rows, ["lightgbm", "flaml", "autogluon"])
    a, b = frame.iloc[0], frame.iloc[1]
    assert a["x flaml"] == pytest.approx(1.1) and a["x lightgbm"] == 1.0  # the refit against LightGBM
    assert b["x flaml"] == pytest.approx(2.0) and b["x lightgbm"] == pytest.approx(0.5)  # lower is better
    assert pd.isna(a["x autogluon"]) and not a["ran autogluon"]
    text = suite.table(frame, ["lightgbm", "flaml", "autogluon"])
    assert "not run" in text and "| 1.100 |" in text
    said = suite.summary(frame, ["lightgbm", "flaml", "autogluon"])
    assert "at least FLAML on 2 of 2 (geometric mean ratio 1.483)" in said
    assert "at least LightGBM on 1 of 2" in said and "at least AutoGluon on 0 of 0" in said


def test_an_anchor_that_ended_with_nothing_loses_to_any_submission(suite):
    rows = [_trial("a", "cbr", 0.7, submitted=None), _trial("a", "flaml", None),
            _trial("c", "cbr", None, submitted=None), _trial("c", "flaml", 0.6)]
    frame = suite.cells(rows, ["flaml"])
    assert frame.iloc[0]["x flaml"] == math.inf and pd.isna(frame.iloc[1]["x flaml"])
    assert "| only cbr |" in suite.table(frame, ["flaml"])
    said = suite.summary(frame, ["flaml"])
    assert "cbr ended with a submission in 1 of 2" in said and "at least FLAML on 1 of 2" in said


def test_a_config_with_a_wrong_key_or_budget_is_one_sentence(suite, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('name = "x"\nbudgets = ["1m"]\ntables = ["t"]\nbudget = "5m"\n')
    with pytest.raises(SystemExit, match="unknown keys budget"):
        suite.read_config(config)
    config.write_text('name = "x"\nbudgets = ["soon"]\ntables = ["t"]\n')
    with pytest.raises(SystemExit, match="as 30s or 5m"):
        suite.read_config(config)
    for shipped in sorted((REPO / "benchmarks" / "configs").glob("*.toml")):
        assert suite.read_config(shipped).tables, shipped
