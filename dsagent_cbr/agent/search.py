"""`cbr develop --model none`: case-based model search without an LLM. Each iteration adapts the next
compatible past solution (agents' retained solutions first, then references, nearest first) with the
structural adapter, runs it, and keeps the one with the best selection score.

    l0 = the starter's result
    candidates = compatible solutions, retained first, nearest first
    for t, case in enumerate(candidates[:T]):
        code   = adapt(case, task)          structural: the case's model, the task's data
        result = execute(code)
        retain (task, code) when the selection score improves and beats the starter's"""

from __future__ import annotations

from pathlib import Path

from dsagent_cbr.adapter import Adapted, adapt_case
from dsagent_cbr.agent.candidates import solution_candidates
from dsagent_cbr.agent.develop import DevelopConfig, open_run
from dsagent_cbr.agent.record import RunRecord
from dsagent_cbr.agent.run import Run
from dsagent_cbr.agent.seams import Bank, Executor, Progress
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.tasks.model import Task


def develop_without_model(task: Task, config: DevelopConfig, run_dir: Path, bank: Bank,
                          executor: Executor | None = None, progress: Progress | None = None,
                          reference: float | None = None) -> RunRecord:
    run = open_run("search", task, config, run_dir, bank, executor, progress, reference=reference)
    with run.stopping():
        run.baseline_run()
        cases = [Case.from_dict(c) for c in run.journal.step(0, "retrieve", lambda: [
            {**c.to_dict(), "score": s} for c, s in solution_candidates(bank, task, config.iterations)])]
        for t, case in enumerate(cases[:config.iterations], start=1):
            search_iteration(run, t, case)
            run.end(run.rows[-1])
        if len(cases) < config.iterations:  # the search ends with its candidates, not in empty iterations
            run.record.stopped = f"no case left after {len(cases)} of {config.iterations} iteration(s)"
    return run.close()


def search_iteration(run: Run, t: int, case: Case) -> None:
    row = run.begin(t)
    row.case = row.step = case.task_name or case.id
    run.say(t, "adapt")
    adapted: Adapted = run.journal.step(t, "adapt", lambda: adapt_case(case, run.task))
    if "error" in adapted:
        row.status, row.error = "not adaptable", adapted["error"]
        return
    result = run.execute(t, 0, adapted["code"])
    row.log = f"Adapted {row.case} ({'; '.join(adapted['notes']) or 'same task type'}): {result.feedback().splitlines()[0]}"
    run.consider(row, adapted["code"], result, retain=f"adapt {row.case}")
