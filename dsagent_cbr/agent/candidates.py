"""Which past (task, solution) pairs may be adapted to a task: the same kind of data, a compatible task
type (the same one first), never the task itself; solutions development retained (the paper's agent
bank B, chosen by selection score) before the hand-written references that seed it; each group nearest
first, and each script once."""

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
    """Up to k candidates for `task`: the same task type before a merely compatible one; within each,
    retained ones before references, nearest first; a script met once (retained copies of one solution,
    a solution retained from an adapted run of another) is one candidate."""
    from dsagent_cbr.adapter import unwrap_adapted
    from dsagent_cbr.bank.doctext import task_query

    query = task_query(task.description, task.modality)
    found: list[tuple[Case, float]] = []
    seen: set[str] = set()
    for task_type in COMPATIBLE.get(task.task_type, (task.task_type,)):
        for source in SOURCE_ORDER:
            where = {"modality": task.modality, "task_type": task_type, "kind": source}
            for hit in bank.search(
                query, kind="solution", k=3 * k, where=where, exclude_task=task.name
            ):
                key = " ".join(unwrap_adapted(hit.case.script)[0].split())
                if key not in seen:
                    seen.add(key)
                    found.append((hit.case, hit.score))
    return found[:k]
