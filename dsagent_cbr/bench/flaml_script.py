"""The FLAML anchor: a FLAML script in a task's own skeleton, graded by the runner like any agent's.

FLAML searches one 2-D table for one target: what that supports, and what the anchors share, is in
anchors.py. Categorical columns go to FLAML as pandas categories, text through a TF-IDF front end
(word 1-2 grams, sublinear tf): untrusted/flaml_anchor.py. The same template without the search fits
LightGBM as it comes (lightgbm_script)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsagent_cbr.bench import anchors
from dsagent_cbr.bench.anchors import splice
from dsagent_cbr.tasks.model import Task

__all__ = [
    "FLAML_METRIC",
    "flaml_script",
    "lightgbm_script",
    "settings_for",
    "splice",
    "unsupported",
]

TEMPLATE = Path(__file__).parents[1] / "untrusted" / "flaml_anchor.py"
# our metric -> FLAML's metric searched on (medae has no FLAML name: mae is the nearest it offers)
FLAML_METRIC = {
    "accuracy": "accuracy",
    "auroc": "roc_auc",
    "logloss": "log_loss",
    "rmse": "rmse",
    "mse": "mse",
    "mae": "mae",
    "medae": "mae",
    "rmsle": "rmse",
    "mcrmse": "rmse",
}


def unsupported(task: Task) -> str | None:
    """Why FLAML cannot run on this task, or None."""
    return anchors.unsupported(task, "FLAML", FLAML_METRIC)


def settings_for(task: Task, budget: float, seed: int, search: bool = True) -> dict[str, Any]:
    return anchors.settings(
        task, "FLAML", FLAML_METRIC, BUDGET=float(budget), SEED=seed, SEARCH=search
    )


def flaml_script(task: Task, budget: float, seed: int) -> str:
    """The starter of `task` with FLAML in place of the random guess."""
    return anchors.anchor_script(
        task, "FLAML", unsupported(task), TEMPLATE, settings_for(task, budget, seed)
    )


def lightgbm_script(task: Task) -> str:
    """The starter of `task` with LightGBM as it comes in place of the random guess: FLAML's table and
    labels without its search (benchmarks/suite.py's default LightGBM)."""
    return anchors.anchor_script(
        task, "LightGBM", unsupported(task), TEMPLATE, settings_for(task, 0, 0, search=False)
    )
