"""`cbr bank recheck`: the bank's retained solutions graded again by today's harness, and dropped where
their selection score does not hold.

Until the workspace builder gave a sample submission placeholders for the held rows, it gave them their
labels (harness/workspace.py): a script that read the sample submission and merged on id could score
perfectly on rows it never learned, and such a script was retained like an honest one. Only tasks with a
file that lists the test ids (a sample submission) were open to it, so only their retained solutions are
run again: each in the sandbox, on its task as it is now. A solution whose selection score falls by more
than a tenth of its lead over the prior baseline (agent/refit.py's rule), or that no longer runs, is dropped from the bank with
the insight retained beside it; the others are kept."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dsagent_cbr.agent.refit import fell
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.harness.baseline import prior_score
from dsagent_cbr.harness.plan import hold_out
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.harness.workspace import id_lists
from dsagent_cbr.sandbox import SandboxPolicy
from dsagent_cbr.tasks.model import Task


class RetainedBank(Protocol):
    def list(self, kind: str = ..., where: dict[str, object] | None = ...) -> list[Case]: ...

    def remove(self, ids: list[str]) -> list[str]: ...


@dataclass(frozen=True)
class Verdict:
    case: Case
    outcome: str  # kept | dropped | not checked
    why: str


def recheck(
    bank: RetainedBank,
    tasks: dict[str, Task],
    policy: SandboxPolicy,
    folder: Path,
    *,
    dry_run: bool = False,
    say: Callable[[Verdict], None] = lambda v: None,
) -> list[Verdict]:
    """Every retained solution judged again (`tasks`: by name, the task folders to judge them on); the
    dropped ones are removed with their insights unless `dry_run`."""
    verdicts = []
    for case in bank.list("solution", where={"kind": "retained"}):
        verdict = _judge(case, tasks.get(case.task_name), policy, folder / case.id)
        if verdict.outcome == "dropped" and not dry_run:
            bank.remove([case.id, *_insights_beside(bank, case)])
        verdicts.append(verdict)
        say(verdict)
    return verdicts


def _judge(case: Case, task: Task | None, policy: SandboxPolicy, folder: Path) -> Verdict:
    if task is None:
        return Verdict(
            case, "not checked", f"no task folder named {case.task_name!r} was given or found"
        )
    if not id_lists(task) or case.selection_score is None:
        why = "its task lists no test ids beside the test file: no label was ever shown"
        return Verdict(case, "kept", why)
    result = run_script(task, case.script, run_dir=folder, policy=policy)
    if not result.ok:
        return Verdict(case, "dropped", f"it no longer runs ({result.status}: {result.error})")
    now, before = result.selection_metric, case.selection_score
    if now is None or fell(task.direction, before, now, prior_score(task, hold_out(task))):
        return Verdict(
            case,
            "dropped",
            f"selection {task.metric_name} {_shown(now)} now against {before:.4g} "
            "when retained: the score came from labels it was shown",
        )
    return Verdict(
        case, "kept", f"selection {task.metric_name} {now:.4g} now, {before:.4g} when retained"
    )


def _insights_beside(bank: RetainedBank, solution: Case) -> list[str]:
    """The insight retained with `solution`: same task, run and iteration."""
    run, iteration = solution.extra.get("run"), solution.extra.get("iteration")
    return [
        c.id
        for c in bank.list("insight", where={"kind": "retained"})
        if c.task_name == solution.task_name
        and c.extra.get("run") == run
        and c.extra.get("iteration") == iteration
        and run is not None
    ]


def _shown(value: float | None) -> str:
    return "none" if value is None else f"{value:.4g}"
