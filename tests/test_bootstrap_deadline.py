"""The bootstrap (untrusted/bootstrap.py) stops a booster sooner than its deadline when predicting the rows
the script will predict, with the trees built so far, would not end before the script is killed. Run as
the sandbox runs it (`python -c <its text>` beside train.py), with the times and rows the harness gives."""

from __future__ import annotations

import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest

TRAIN = """import numpy as np
X = np.random.default_rng(0).normal(size=(1000, 8))
y = X[:, 0] + np.sin(X[:, 1])
{fit}
print("trees", {trees})
"""
FITS = {
    "lightgbm": ("import lightgbm as lgb\nmodel = lgb.LGBMRegressor(n_estimators=100, verbose=-1).fit(X, y)",
                 "model.booster_.num_trees()"),
    "xgboost": ("import xgboost as xgb\nmodel = xgb.XGBRegressor(n_estimators=100, tree_method='hist').fit(X, y)",
                "model.get_booster().num_boosted_rounds()"),
}


def trained(folder: Path, library: str, predict_rows: int) -> tuple[int, str]:
    """The trees the script kept and what the bootstrap said, with a minute to go before its deadline."""
    fit, trees = FITS[library]
    (folder / "train.py").write_text(TRAIN.format(fit=fit, trees=trees))
    now = time.time()
    env = {"CBR_DEADLINE": f"{now + 60:.1f}", "CBR_END": f"{now + 70:.1f}", "CBR_PREDICT_ROWS": str(predict_rows),
           "PATH": "/usr/bin:/bin"}
    bootstrap = resources.files("dsagent_cbr.untrusted").joinpath("bootstrap.py").read_text(encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", bootstrap], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split("trees")[-1]), done.stderr


@pytest.mark.integration
@pytest.mark.parametrize("library", sorted(FITS))
def test_a_booster_whose_predictions_would_outlast_the_script_stops_and_keeps_its_trees(tmp_path, library):
    # a billion rows to predict: even one round's trees would take longer than the minute left
    trees, said = trained(tmp_path, library, 10**9)
    assert trees == 1 and "stopped at the time it needs to predict after 1 rounds" in said
    # a thousand rows take milliseconds: the booster trains to its end
    assert trained(tmp_path, library, 1000)[0] == 100
