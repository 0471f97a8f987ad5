"""What every prompt may say about a task: its description, its data card, its metric with the
direction, and the compute budget a script runs under. A capable model writes 5,000-tree boosters and
guesses column names unless it is told both."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dsagent_cbr.runner.sandbox import SandboxPolicy
from dsagent_cbr.tasks.model import Task

# The libraries a solution script is likely to reach for; the prompt names the installed versions so
# that the model writes against the APIs it will actually get.
LIBRARIES = ("numpy", "pandas", "scikit-learn", "scipy", "lightgbm", "xgboost", "catboost", "statsmodels",
             "torch", "sktime", "aeon")


@cache
def library_versions() -> str:
    from importlib import metadata

    found = []
    for name in LIBRARIES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def budget_line(policy: SandboxPolicy) -> str:
    network = "network allowed" if policy.allow_network else "no network"
    return (f"each run of the script gets at most {policy.timeout:g} s of wall time, {policy.cores} CPU "
            f"core(s), {policy.memory_mb:g} MB of memory (/tmp included), no GPU, {network}. "
            f"Installed: {library_versions()}.")


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


_THEIR_LINE = re.compile(r"final\s+([A-Za-z][\w ]*?)\s+on\s+(?:the\s+)?validation\s+set", re.IGNORECASE)


def validation_line(task: Task) -> str:
    """The line the task's own starter prints of its validation score: ours, or DS-Agent's."""
    theirs = _THEIR_LINE.search(task.starter.read_text(encoding="utf-8", errors="replace"))
    if theirs:
        return f"final {theirs.group(1)} on validation set: <value>"
    return f"Validation {task.metric_name}: <value>"


@dataclass(frozen=True)
class Context:
    task: Task
    description: str  # the task's words, without the data card a created task's description ends with
    data_card: str
    budget: str
    metric: str
    validation_line: str  # as the starter prints it, for the programmer to keep

    @classmethod
    def of(cls, task: Task, policy: SandboxPolicy) -> Context:
        from dsagent_cbr.tasks.datacard import data_card

        description = task.description.split(f"\n{CARD_HEADING}", 1)[0].rstrip()
        card = data_card(task).removeprefix(CARD_HEADING).strip()
        return cls(task, description, card, budget_line(policy), metric_line(task), validation_line(task))
