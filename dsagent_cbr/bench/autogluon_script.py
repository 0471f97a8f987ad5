"""The AutoGluon anchor: AutoGluon Tabular (presets medium_quality, as its users run it) in a task's own
skeleton, graded by the runner like any agent's. What it supports, and what it shares with FLAML's, is in
anchors.py; the script itself is untrusted/autogluon_anchor.py.

AutoGluon lives in an environment of its own: its 1.6 releases pin pandas below 2.4, and cbr runs on pandas 3,
so installing it beside cbr would downgrade cbr's pandas. setup-autogluon.sh makes that environment, a
venv that also sees cbr's own packages (--system-site-packages) and shadows only what AutoGluon pins.
An AutoGluon trial runs `cbr run` under that environment's python (`python`): the sandbox mounts the
interpreter that runs cbr and its site-packages, read-only, as it always does, so nothing of the sandbox
changes; the runner's grading then runs there too (the same code, on that environment's pandas 2)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from dsagent_cbr.bench import anchors
from dsagent_cbr.tasks.model import Task

TEMPLATE = Path(__file__).parents[1] / "untrusted" / "autogluon_anchor.py"
PRESETS = "medium_quality"
# an interpreter with autogluon.tabular, if not the default below
PYTHON_VARIABLE = "CBR_AUTOGLUON_PYTHON"
VENV_PYTHON = Path("/opt/cbr-autogluon/bin/python")  # what setup-autogluon.sh makes
# our metric -> AutoGluon's eval_metric (rmsle: root_mean_squared_error on log1p(y); mcrmse: per target)
AUTOGLUON_METRIC = {
    "accuracy": "accuracy",
    "auroc": "roc_auc",
    "logloss": "log_loss",
    "rmse": "root_mean_squared_error",
    "mse": "mean_squared_error",
    "mae": "mean_absolute_error",
    "medae": "median_absolute_error",
    "rmsle": "root_mean_squared_error",
    "mcrmse": "root_mean_squared_error",
}
# run by the candidate interpreter: can it import AutoGluon Tabular and cbr (the trial runs `cbr run` there)?
_PROBE = (
    "import importlib.util as u, sys; "
    "sys.exit(0 if u.find_spec('autogluon') and u.find_spec('autogluon.tabular') and u.find_spec('dsagent_cbr') "
    "else 1)"
)
_VERSIONS = (
    "import importlib.metadata as m, json; "
    "print(json.dumps({n: m.version(n) for n in ('autogluon.tabular', 'catboost', 'pandas')}))"
)


def unsupported(task: Task) -> str | None:
    """Why AutoGluon cannot run on this task, or None (whether it is installed is `missing`'s question)."""
    return anchors.unsupported(task, "AutoGluon Tabular", AUTOGLUON_METRIC)


def settings_for(task: Task, budget: float) -> dict[str, Any]:
    """No seed: AutoGluon seeds its models itself (0), as its users run it."""
    return anchors.settings(
        task, "AUTOGLUON", AUTOGLUON_METRIC, BUDGET=float(budget), PRESETS=PRESETS
    )


def autogluon_script(task: Task, budget: float) -> str:
    """The starter of `task` with AutoGluon in place of the random guess."""
    return anchors.anchor_script(
        task, "AutoGluon", unsupported(task), TEMPLATE, settings_for(task, budget)
    )


def _has_autogluon(python: str) -> bool:
    try:
        return (
            subprocess.run([python, "-c", _PROBE], capture_output=True, timeout=60).returncode == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


@cache
def python() -> str | None:
    """The interpreter AutoGluon trials run `cbr run` under: this one when it has AutoGluon, else
    $CBR_AUTOGLUON_PYTHON, else setup-autogluon.sh's venv; None when none of them has it."""
    if importlib.util.find_spec("autogluon") and importlib.util.find_spec("autogluon.tabular"):
        return sys.executable
    named = os.environ.get(PYTHON_VARIABLE, "").strip()
    candidate = named or (str(VENV_PYTHON) if VENV_PYTHON.is_file() else "")
    return candidate if candidate and _has_autogluon(candidate) else None


def missing() -> str | None:
    """Why no AutoGluon trial can run here, or None."""
    if python() is not None:
        return None
    named = os.environ.get(PYTHON_VARIABLE, "").strip()
    where = (
        f"{PYTHON_VARIABLE}={named} cannot import it"
        if named
        else f"no venv at {VENV_PYTHON.parents[1]}"
    )
    return (
        f"AutoGluon is not installed ({where}): run setup-autogluon.sh, or name a python that has "
        f"autogluon.tabular in {PYTHON_VARIABLE}"
    )


@cache
def versions() -> dict[str, str]:
    """AutoGluon's release and CatBoost's, for the tables' stamp; with the interpreter and its pandas when
    that is not cbr's own (the anchor's scores depend on them)."""
    interpreter = python()
    if interpreter is None:
        return {}
    try:
        done = subprocess.run(
            [interpreter, "-c", _VERSIONS], capture_output=True, text=True, timeout=60
        )
        found = json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return {}
    out = {"autogluon.tabular": found["autogluon.tabular"], "catboost": found["catboost"]}
    if interpreter != sys.executable:
        out["autogluon.tabular"] += f" ({interpreter}, pandas {found['pandas']})"
    return out
