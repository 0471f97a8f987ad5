"""The search's *draft* without a model: cbr's general solution for the task's kind of data, as a case
the structural adapter fits to the task like any other (solutions/general_*.py)."""

from __future__ import annotations

from importlib import resources

from dsagent_cbr.bank.cases import Case
from dsagent_cbr.tasks.model import Task

GENERAL = "general"  # the case name rows and reports show
_CLASSIFIER = {"lgb.LGBMRegressor(": "lgb.LGBMClassifier(", "Ridge(alpha=1.0)": "LogisticRegression(C=4.0, max_iter=3000)",
               "import Ridge": "import LogisticRegression"}
_MODALITIES = ("tabular", "text")
_ABSOLUTE = {"mae", "medae"}  # metrics a gradient-boosting model should learn with an absolute loss


def general_case(task: Task) -> Case | None:
    """The general solution for the task as a solution case; None for kinds of data it does not cover."""
    if task.modality not in _MODALITIES:
        return None
    script = resources.files("dsagent_cbr.search.solutions").joinpath(f"general_{task.modality}.py").read_text(
        encoding="utf-8")
    for regressor, classifier in _CLASSIFIER.items() if task.task_type != "regression" else ():
        script = script.replace(regressor, classifier)
    if task.metric_name in _ABSOLUTE:
        script = script.replace("objective=None", 'objective="l1"')
    # a multi-label task is learnt one label at a time (the adapter fits one model per label column)
    task_type = "binary-classification" if task.task_type == "multilabel-classification" else task.task_type
    return Case(kind="solution", text=f"cbr's general {task.modality} solution", task_name=GENERAL,
                source_kind="cbr", modality=task.modality, task_type=task_type, script=script,
                metric=task.metric_name)

