"""What every prompt may say about a task: its description, its data card, its metric with the
direction, and the compute budget a script runs under. A capable model writes 5,000-tree boosters and
guesses column names unless it is told both."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.tasks.model import Task

# The libraries a solution script is likely to reach for, by the name it imports them by; the prompt names
# the installed versions so that the model writes against the APIs it will actually get. A library is found
# by its module, whatever distribution installed it (XGBoost's CPU build is the distribution xgboost-cpu).
LIBRARIES = {
    "numpy": "numpy",
    "pandas": "pandas",
    "scikit-learn": "sklearn",
    "scipy": "scipy",
    "lightgbm": "lightgbm",
    "xgboost": "xgboost",
    "catboost": "catboost",
    "statsmodels": "statsmodels",
    "torch": "torch",
    "sktime": "sktime",
    "aeon": "aeon",
}


@cache
def library_versions() -> str:
    from importlib import metadata

    installed = metadata.packages_distributions()
    found = []
    for name, module in LIBRARIES.items():
        for distribution in installed.get(module, []):
            found.append(f"{name} {metadata.version(distribution)}")
            break
    return ", ".join(found)


def budget_line(policy: SandboxPolicy) -> str:
    network = "network allowed" if policy.allow_network else "no network"
    return (
        f"each run of the script gets at most {policy.timeout:g} s of wall time, {policy.cores} CPU "
        f"core(s), {policy.memory_mb:g} MB of memory (/tmp included), no GPU, {network}. "
        f"Installed: {library_versions()}."
    )


def reference_valid(task: Task, casebank_dir: Path, tasks_dir: Path) -> float | None:
    """The validation score of the task's hand-written reference, where the case bank's seed holds one
    for this very task folder (for the report's reference line; never shown to a model)."""
    import tomllib

    meta = casebank_dir / "solutions" / task.name / "meta.toml"
    if task.root.parent.resolve() != tasks_dir.resolve() or not meta.is_file():
        return None
    value = tomllib.loads(meta.read_text(encoding="utf-8")).get("valid_score")
    return float(value) if isinstance(value, int | float) else None


def metric_line(task: Task) -> str:
    better = "higher is better" if task.direction == "maximize" else "lower is better"
    return f"{task.metric_name} ({better})"


CARD_HEADING = "## Data card"


_THEIR_LINE = re.compile(
    r"final\s+([A-Za-z][\w ]*?)\s+on\s+(?:the\s+)?validation\s+set", re.IGNORECASE
)


def validation_line(task: Task) -> str:
    """The line the task's own starter prints of its validation score: ours, or DS-Agent's."""
    theirs = _THEIR_LINE.search(task.starter.read_text(encoding="utf-8", errors="replace"))
    if theirs:
        return f"final {theirs.group(1)} on validation set: <value>"
    return f"Validation {task.metric_name}: <value>"


def prediction_form(task: Task) -> str:
    """What predict() must return for the grader, in words: values, labels or probabilities, of what."""
    if task.layout == "dsagent":
        return "what the starter passes to submit_predictions_for_test_set, in the same form, one per test row"
    targets = ", ".join(f"`{t}`" for t in task.target) or "the target"
    if task.data_format == "npy" and task.task_type in ("regression", "forecasting"):
        return "an array with one row per input row, each shaped like a row of y_train.npy"
    if task.task_type in ("regression", "forecasting"):
        return f"one predicted value per row for {targets}" + (
            " (one column each)" if len(task.target) > 1 else ""
        )
    if task.metric_name == "accuracy":
        return f"the predicted label per row for {targets}, as the training labels are written"
    if task.metric_name == "logloss":
        order = ", ".join(f"`{c}`" for c in task.classes)
        return f"one probability per class and row, the columns in this order: {order}"
    if task.task_type == "multilabel-classification" or len(task.target) > 1:
        return f"the probability that each label is 1, one column per label ({targets})"
    positive = f" (`{task.classes[-1]}`)" if task.classes else " (the label 1, yes or true)"
    return f"the probability of the positive class{positive} per row"


@dataclass(frozen=True)
class Context:
    task: Task
    # the task's words, without the data card a created task's description ends with
    description: str
    data_card: str
    budget: str
    metric: str
    validation_line: str  # as the starter prints it, for the programmer to keep
    prediction: str  # what predict() returns for the grader

    @classmethod
    def of(cls, task: Task, policy: SandboxPolicy) -> Context:
        from dsagent_cbr.harness.plan import describe, hold_out
        from dsagent_cbr.tasks.datacard import data_card

        description = task.description.split(f"\n{CARD_HEADING}", 1)[0].rstrip()
        card = f"{data_card(task).removeprefix(CARD_HEADING).strip()}\n\n{describe(task, hold_out(task))}"
        return cls(
            task,
            description,
            card,
            budget_line(policy),
            metric_line(task),
            validation_line(task),
            prediction_form(task),
        )
