"""The structural adapter: a past (task, solution) pair's script carried over to a new task without a
model. adapt.py rewrites the case's code for the new task's data with the AST readings and rewrites of
case_inputs.py (the form of the case's inputs), estimators.py (classifiers for regressors, losses,
probabilities) and target_transforms.py (a regression target's transform stripped), and
untrusted/adapter_shim.py is the run-time code transplanted into every adapted script."""

from __future__ import annotations

from typing import TypedDict

from dsagent_cbr.adapter.adapt import AdapterError, CaseSolution, adapt_solution, unwrap_adapted
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.tasks.model import Task

__all__ = [
    "AdapterError",
    "Adapted",
    "CaseSolution",
    "adapt_case",
    "adapt_solution",
    "unwrap_adapted",
]


class Adapted(TypedDict, total=False):
    code: str
    notes: list[str]
    error: str  # the case could not be adapted: why


def adapt_case(case: Case, task: Task) -> Adapted:
    """A case's solution adapted to `task`, or why it cannot be (as data: the loops journal it)."""
    try:
        adapted = adapt_solution(CaseSolution.from_case(case), task)
    except AdapterError as exc:
        return {"error": str(exc)}
    return {"code": adapted.code, "notes": adapted.notes}
