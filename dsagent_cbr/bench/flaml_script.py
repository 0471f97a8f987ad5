"""The AutoML anchor: a FLAML script in a task's own skeleton, graded by the runner like any agent's.

FLAML searches one 2-D table for one target. Supported: tabular tasks (categorical columns as pandas
categories) and text tasks through a TF-IDF front end (word 1-2 grams, sublinear tf), with several
targets (multi-label, multi-output regression) searched one after another on an even share of the
budget. Not supported: forecasting (our tasks map windows to multi-step, multi-dimensional horizons;
FLAML's ts_forecast wants one timestamped series) and time-series classification (3-D arrays,
NaN-padded where lengths differ): see `unsupported`."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from dsagent_cbr.tasks.model import Task

TEMPLATE = Path(__file__).parents[1] / "untrusted" / "flaml_anchor.py"
SETTINGS_START, SETTINGS_END = "# --- settings (written by cbr bench) ---", "# --- end of settings ---"
# our metric -> FLAML's metric searched on (medae has no FLAML name: mae is the nearest it offers)
FLAML_METRIC = {"accuracy": "accuracy", "auroc": "roc_auc", "logloss": "log_loss", "rmse": "rmse", "mse": "mse",
                "mae": "mae", "medae": "mae", "rmsle": "rmse", "mcrmse": "rmse"}


def unsupported(task: Task) -> str | None:
    """Why FLAML cannot run on this task, or None."""
    if task.modality == "forecasting":
        return "forecasting: windows to multi-step, multi-dimensional horizons are not one FLAML table"
    if task.modality == "time-series-classification":
        return "time-series classification: (cases, channels, length) arrays, NaN-padded where lengths differ, are not one FLAML table"
    if task.modality not in ("tabular", "text") or task.data_format != "csv":
        return f"{task.modality} tasks in {task.data_format} format are not supported"
    if task.metric_name not in FLAML_METRIC:
        return f"no FLAML metric for {task.metric_name}"
    return None


def settings_for(task: Task, budget: float, seed: int) -> dict[str, Any]:
    regression = task.task_type == "regression"
    if regression:
        output = "values"
    elif task.metric_name == "auroc":
        output = "positive"
    elif task.metric_name == "logloss":
        output = "classes"
    else:
        output = "labels"
    return {"FLAML_BUDGET": float(budget), "FLAML_SEED": seed,
            "FLAML_TASK": "regression" if regression else "classification",
            "FLAML_METRIC": FLAML_METRIC[task.metric_name], "FLAML_OUTPUT": output,
            "FLAML_CLASSES": list(task.classes), "FLAML_TEXT": task.modality == "text",
            "FLAML_LOG_TARGET": task.metric_name == "rmsle"}


def _model_code(settings: dict[str, Any]) -> str:
    text = TEMPLATE.read_text(encoding="utf-8")
    body = text[text.index('"""', 3) + 3:].lstrip("\n")  # the template's own docstring stays behind
    start, end = body.index(SETTINGS_START), body.index(SETTINGS_END) + len(SETTINGS_END)
    block = "\n".join([SETTINGS_START, *(f"{k} = {v!r}" for k, v in settings.items()), SETTINGS_END])
    return body[:start] + block + body[end:]


def splice(starter: str, code: str) -> str:
    """The starter with its train_model and predict replaced by `code` (at train_model's place)."""
    tree = ast.parse(starter)
    at = [i for i, n in enumerate(tree.body) if isinstance(n, ast.FunctionDef) and n.name in ("train_model", "predict")]
    if len(at) != 2 or at[1] != at[0] + 1:
        raise ValueError("the starter does not define train_model and predict next to each other at the top level")
    spans = [(tree.body[i].lineno, tree.body[i].end_lineno or tree.body[i].lineno) for i in at]
    lines = starter.splitlines()
    (first, _), (_, last) = min(spans), max(spans)
    out = lines[: first - 1] + code.rstrip("\n").splitlines() + lines[last:]
    return "\n".join(out) + "\n"


def flaml_script(task: Task, budget: float, seed: int) -> str:
    """The starter of `task` with FLAML in place of the random guess."""
    problem = unsupported(task)
    if problem:
        raise ValueError(f"FLAML does not support {task.name}: {problem}")
    return splice(task.starter.read_text(encoding="utf-8"), _model_code(settings_for(task, budget, seed)))
