"""`cbr develop --model none`: case-based model search without an LLM. Each iteration adapts the next
compatible past solution (agents' retained solutions first, then references, nearest first) with the
structural adapter, runs it, and keeps the one with the best validation score."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsagent_cbr.agent.adapter import AdapterError, CaseSolution, adapt_solution
from dsagent_cbr.agent.candidates import solution_candidates
from dsagent_cbr.agent.develop import Bank, DevelopConfig, DevelopRun, Executor, Progress, SandboxExecutor
from dsagent_cbr.agent.rundir import step_dir
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.tasks.model import Task


def adapt_case(case: Case, task: Task) -> dict[str, Any]:
    try:
        adapted = adapt_solution(CaseSolution.from_case(case), task)
    except AdapterError as exc:
        return {"error": str(exc)}
    return {"code": adapted.code, "notes": adapted.notes}


def develop_without_model(task: Task, config: DevelopConfig, run_dir: Path, bank: Bank,
                          executor: Executor | None = None, progress: Progress | None = None) -> dict[str, Any]:
    run = DevelopRun(task, config, run_dir, bank, executor or SandboxExecutor(task, config.sandbox), progress)
    with run.stopping():
        run.baseline_run()
        cases = [Case.from_dict(c) for c in run.journal.step(0, "retrieve", lambda: [
            {**c.to_dict(), "score": s} for c, s in solution_candidates(bank, task, config.iterations)])]
        for t, case in enumerate(cases[:config.iterations], start=1):
            _iteration(run, t, case)
            run.end(run.rows[-1])
        if len(cases) < config.iterations:  # the search ends with its candidates, not in empty iterations
            run.stopped = f"no case left after {len(cases)} of {config.iterations} iteration(s)"
        run.refit_best()
    return run.finish()


def _iteration(run: DevelopRun, t: int, case: Case) -> None:
    row = run.begin(t)
    row.case = row.step = case.task_name or case.id
    run.say(t, "adapt")
    adapted = run.journal.step(t, "adapt", lambda: adapt_case(case, run.task))
    if "error" in adapted:
        row.status, row.error = "not adaptable", adapted["error"]
        return
    result = run.execute(t, 0, adapted["code"])
    row.log = f"Adapted {row.case} ({'; '.join(adapted['notes']) or 'same task type'}): {result.feedback().splitlines()[0]}"
    run.log.append(row.log)
    run.consider(row, adapted["code"], result, step_dir(run.run_dir, t), f"adapt {row.case}")
