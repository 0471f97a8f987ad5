"""The bootstrap (untrusted/bootstrap.py) stops a booster sooner than its deadline when predicting the rows
the script will predict, with the trees built so far, would not end before the script is killed. Run as
the sandbox runs it (`python -c <its text>` beside train.py), with the times and rows the harness gives."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest

TRAIN = """import numpy as np
X = np.random.default_rng(0).normal(size=({rows}, 8))
y = X[:, 0] + np.sin(X[:, 1])
{fit}
print("trees", {trees})
"""
FITS = {
    "lightgbm": ("import lightgbm as lgb\nmodel = lgb.LGBMRegressor(n_estimators=100, verbose=-1).fit(X, y)",
                 "model.booster_.num_trees()"),
    # a frame of categories: each prediction costs milliseconds whatever its rows
    "lightgbm-categories": ("import lightgbm as lgb\nimport pandas as pd\n"
                            "X = pd.DataFrame({f'c{k}': pd.Categorical(np.floor(X[:, k] * 3).astype(int).astype(str))"
                            " for k in range(6)} | {'x': X[:, 6]})\n"
                            "model = lgb.LGBMRegressor(n_estimators=100, verbose=-1).fit(X, y)",
                            "model.booster_.num_trees()"),
    "xgboost": ("import xgboost as xgb\nmodel = xgb.XGBRegressor(n_estimators=100, tree_method='hist').fit(X, y)",
                "model.get_booster().num_boosted_rounds()"),
}


def trained(folder: Path, library: str, predict_rows: int, rows: int = 1000, deadline: float = 60.0) -> tuple[int, str]:
    """The trees the script kept and what the bootstrap said, with `deadline` seconds to go before its
    deadline, and 10 s more before it is killed."""
    fit, trees = FITS[library]
    (folder / "train.py").write_text(TRAIN.format(fit=fit, trees=trees, rows=rows))
    now = time.time()
    env = {"CBR_DEADLINE": f"{now + deadline:.1f}", "CBR_END": f"{now + deadline + 10:.1f}",
           "CBR_PREDICT_ROWS": str(predict_rows),
           "PATH": "/usr/bin:/bin"}
    bootstrap = resources.files("dsagent_cbr.untrusted").joinpath("bootstrap.py").read_text(encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", bootstrap], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split("trees")[-1]), done.stderr


@pytest.mark.integration
@pytest.mark.parametrize("library", ["lightgbm", "xgboost"])
def test_a_booster_whose_predictions_would_outlast_the_script_stops_and_keeps_its_trees(tmp_path, library):
    # a billion rows to predict: even one round's trees would take longer than the minute left
    trees, said = trained(tmp_path, library, 10**9)
    assert trees == 1 and "stopped at the time it needs to predict after 1 rounds" in said
    # a thousand rows take milliseconds: the booster trains to its end
    assert trained(tmp_path, library, 1000)[0] == 100


@pytest.mark.integration
def test_what_any_prediction_costs_once_is_not_counted_for_every_row(tmp_path):
    """Two million rows of a frame of categories, predicted by LightGBM's 100 small trees, take about
    four seconds: the defaults train to their end with 20 s left. Probes of 1,000 rows counted the
    milliseconds any prediction of such a frame takes for every row, and stopped it after a few rounds."""
    trees, said = trained(tmp_path, "lightgbm-categories", 2_000_000, rows=20_000, deadline=10.0)
    # here 100 on an idle machine and 31 to 75 on a busy one, where 1,000-row probes stopped it before 8
    assert trees > 16, said


UNWATCHED = """import os
import lightgbm as lgb
import numpy as np
X = np.random.default_rng(0).normal(size=(2000, 8))
y = X[:, 0] + np.sin(X[:, 1])


def train_model(X, y):
    return lgb.LGBMRegressor(n_estimators=200, verbose=-1).fit(X, y)  # no validation rows: no early stop


if __name__ == "__main__":
    model = train_model(X[:1600], y[:1600])
    if os.environ.get("CBR_REFIT"):
        model = train_model(X, y)
    booster = model.booster_
    print("predicts with", booster.best_iteration or booster.current_iteration())
"""


def fitted(folder: Path, deadline: float, first_fit: str | None = None) -> int:
    """The rounds UNWATCHED's model predicts with, its deadline `deadline` seconds away (a first fit,
    or a refit told the first fit's rounds)."""
    (folder / "train.py").write_text(UNWATCHED)
    env = {"CBR_DEADLINE": f"{time.time() + deadline:.1f}", "PATH": "/usr/bin:/bin"}
    env |= {"CBR_REFIT": "1", "CBR_FIRST_FIT": first_fit} if first_fit is not None else {}
    bootstrap = resources.files("dsagent_cbr.untrusted").joinpath("bootstrap.py").read_text(encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", bootstrap], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split("predicts with")[-1])


@pytest.mark.integration
def test_a_refit_runs_a_booster_that_watched_no_rows_to_the_scripts_count_past_its_first_fits_deadline(tmp_path):
    """A booster given no validation rows cannot stop early: where its first fit stopped, the deadline
    stopped it, and its refit learns the rounds the script asked for (LightGBM's defaults on 1.4 million
    rows, cut at 52 of 100 rounds, were refit to 52 rounds), up to twice the first fit's rounds. Cut short
    of the first fit's rounds in the refit, it says so, and cbr holds it to them (agent/refit.py's
    cut_short)."""
    from dsagent_cbr.agent.refit import cut_short
    from dsagent_cbr.harness.readers import read_fit_rounds, read_refit_rounds

    first, refit = tmp_path / "first", tmp_path / "refit"
    first.mkdir(), refit.mkdir()
    assert fitted(first, deadline=-1) == 1  # the deadline has passed: one round
    plan = read_fit_rounds(first)
    assert plan == {"calls": [None], "models": [], "unwatched": [1]}  # it did not stop early
    # refit to the script's 200 rounds, or at most twice the first fit's (bootstrap.RUN_ON)
    assert fitted(refit, deadline=60, first_fit=json.dumps(plan | {"unwatched": [150]})) == 200
    assert read_refit_rounds(refit) == []  # counted, and none cut short
    assert fitted(refit, deadline=60, first_fit=json.dumps(plan | {"unwatched": [60]})) == 120
    # a first fit of all 200 rounds, and a refit its deadline cuts after one
    assert fitted(first, deadline=60) == 200
    assert fitted(refit, deadline=-1, first_fit=(first / "cbr_fit_rounds.json").read_text()) == 1
    assert read_refit_rounds(refit) == [[200, 1]] and cut_short(1.0, 60.0, read_refit_rounds(refit))
