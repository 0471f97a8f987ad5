"""What the AutoML anchors (flaml_script.py, autogluon_script.py) share: a learner's train_model and predict
spliced into a task's own starter in place of its random guess, so that the runner loads, splits, scores
and grades it like any agent's script.

Both learners fit one 2-D table per target. Supported: tabular and text csv tasks, with several targets
(multi-label, multi-output regression) fitted one after another on an even share of the time; RMSLE as
RMSE on log1p(y). Not supported: forecasting (our tasks map windows to multi-step, multi-dimensional
horizons, not one table) and time-series classification (3-D arrays, NaN-padded where lengths differ).
What predict returns follows the task's metric (`output`); each learner's module names the metric in
its own words and adds its own settings."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from dsagent_cbr.python_syntax import parse as parse_python
from dsagent_cbr.tasks.model import Task

SETTINGS_START, SETTINGS_END = (
    "# --- settings (written by cbr bench) ---",
    "# --- end of settings ---",
)


def unsupported(task: Task, learner: str, metrics: dict[str, str]) -> str | None:
    """Why `learner` cannot run on this task, or None; `metrics` maps our metric names to the learner's."""
    if task.modality == "forecasting":
        return f"forecasting: windows to multi-step, multi-dimensional horizons are not one {learner} table"
    if task.modality == "time-series-classification":
        return (
            "time-series classification: (cases, channels, length) arrays, NaN-padded where lengths differ, "
            f"are not one {learner} table"
        )
    if task.modality not in ("tabular", "text") or task.data_format != "csv":
        return f"{task.modality} tasks in {task.data_format} format are not supported"
    if task.metric_name not in metrics:
        return f"no {learner} metric for {task.metric_name}"
    return None


def output(task: Task) -> str:
    """What the task's predict returns: values (regression), the positive class's probability (AUROC),
    class probabilities in the task's class order (log loss), or labels."""
    if task.task_type == "regression":
        return "values"
    if task.metric_name == "auroc":
        return "positive"
    return "classes" if task.metric_name == "logloss" else "labels"


def settings(task: Task, prefix: str, metrics: dict[str, str], **first: Any) -> dict[str, Any]:
    """A learner's settings block, each name behind `prefix`: `first` (its own), then what every anchor
    needs to know of the task."""
    regression = task.task_type == "regression"
    shared = {
        "TASK": "regression" if regression else "classification",
        "METRIC": metrics[task.metric_name],
        "OUTPUT": output(task),
        "CLASSES": list(task.classes),
        "TEXT": task.modality == "text",
        "LOG_TARGET": task.metric_name == "rmsle",
    }
    return {f"{prefix}_{name}": value for name, value in {**first, **shared}.items()}


def model_code(template: Path, values: dict[str, Any]) -> str:
    """The template's code after its docstring, with its settings block rewritten to `values`."""
    text = template.read_text(encoding="utf-8")
    # the template's own docstring stays behind
    body = text[text.index('"""', 3) + 3 :].lstrip("\n")
    start, end = body.index(SETTINGS_START), body.index(SETTINGS_END) + len(SETTINGS_END)
    block = "\n".join([SETTINGS_START, *(f"{k} = {v!r}" for k, v in values.items()), SETTINGS_END])
    return body[:start] + block + body[end:]


def splice(starter: str, code: str) -> str:
    """The starter with its train_model and predict replaced by `code` (at train_model's place)."""
    tree = parse_python(starter)
    at = [
        i
        for i, n in enumerate(tree.body)
        if isinstance(n, ast.FunctionDef) and n.name in ("train_model", "predict")
    ]
    if len(at) != 2 or at[1] != at[0] + 1:
        raise ValueError(
            "the starter does not define train_model and predict next to each other at the top level"
        )
    spans = [(tree.body[i].lineno, tree.body[i].end_lineno or tree.body[i].lineno) for i in at]
    lines = starter.splitlines()
    (first, _), (_, last) = min(spans), max(spans)
    out = lines[: first - 1] + code.rstrip("\n").splitlines() + lines[last:]
    return "\n".join(out) + "\n"


def anchor_script(
    task: Task, learner: str, problem: str | None, template: Path, values: dict[str, Any]
) -> str:
    """The starter of `task` with the learner's template (settings `values`) in place of the random guess;
    `problem` is why the learner cannot run on the task, if it cannot."""
    if problem:
        raise ValueError(f"{learner} does not support {task.name}: {problem}")
    return splice(task.starter.read_text(encoding="utf-8"), model_code(template, values))
