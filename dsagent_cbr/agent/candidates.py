"""Which past (task, solution) pairs may be adapted to a task: the same kind of data, a compatible task
type, never the task itself; solutions development retained (the paper's agent bank B, chosen by
validation) before the hand-written references that seed it; each group nearest first."""

from __future__ import annotations

from dsagent_cbr.agent.seams import Bank
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.tasks.model import Task

# A solution can be carried over when its model answers the same kind of question: a classifier serves
# any classification (one model per label for multi-label), a regressor only regression. A regression
# case adapted to classification keeps its target transform and its loss: that fails or misleads.
COMPATIBLE = {
    "regression": ("regression",),
    "binary-classification": ("binary-classification", "multiclass-classification"),
    "multiclass-classification": ("multiclass-classification", "binary-classification"),
    "multilabel-classification": ("multilabel-classification", "binary-classification"),
    "forecasting": ("forecasting",),
}
SOURCE_ORDER = ("retained", "reference")


def solution_candidates(bank: Bank, task: Task, k: int) -> list[tuple[Case, float]]:
    """Up to k candidates for `task`, retained ones first, each group by similarity."""
    from dsagent_cbr.bank.doctext import task_query

    query = task_query(task.description, task.modality)
    types = list(COMPATIBLE.get(task.task_type, (task.task_type,)))
    found: list[tuple[Case, float]] = []
    for source in SOURCE_ORDER:
        where = {"modality": task.modality, "task_type": {"$in": types}, "kind": source}
        hits = bank.search(query, kind="solution", k=k, where=where, exclude_task=task.name)
        found += [(h.case, h.score) for h in hits]
    return found[:k]
