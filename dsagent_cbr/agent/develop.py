"""`cbr develop`: the development stage, as the paper's Algorithm 1.

retrieve top-k insight cases -> for t in 1..T: rerank (given the log) -> plan from the top case ->
program -> execute -> debug up to n_debug times -> log -> retain when the test score improves.
With no model, the loop is a case-based model search: each iteration adapts the next most similar
solution case structurally, runs it and keeps the best."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dsagent_cbr.agent.journal import Journal, write_text_atomic
from dsagent_cbr.agent.rundir import step_dir, write_report
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.runner.result import RunResult
from dsagent_cbr.runner.run import run_script
from dsagent_cbr.tasks.model import Task


@dataclass
class DevelopConfig:
    iterations: int = 5
    k: int = 5
    n_debug: int = 5
    temperature: float = 0.5
    rerank: bool = True
    cbr: bool = True
    timeout: float = 600.0
    memory_mb: float = 8192.0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DevelopConfig:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class Progress(Protocol):
    def update(self, **fields: Any) -> None: ...


class _Quiet:
    def update(self, **fields: Any) -> None:
        pass


class Bank(Protocol):
    def search(self, text: str, kind: str = ..., k: int = ..., where: dict | None = ...,
               exclude_task: str | None = ...) -> list[Any]: ...

    def add(self, cases: list[Case]) -> Any: ...


@dataclass
class Iteration:
    iteration: int
    case: str = ""
    step: str = ""
    status: str = "not run"
    debug_attempts: int = 0
    valid: float | None = None
    test: float | None = None
    retained: bool = False
    log: str = ""


@dataclass
class DevelopState:
    task: Task
    config: DevelopConfig
    run_dir: Path
    journal: Journal
    script: str  # the last script that ran; the programmer edits it next
    log: list[str] = field(default_factory=list)
    rows: list[Iteration] = field(default_factory=list)
    best_test: float | None = None
    best_valid: float | None = None
    best_iteration: int | None = None
    stopped: str = ""


def _execute(state: DevelopState, t: int, attempt: int, code: str) -> RunResult:
    folder = step_dir(state.run_dir, t, attempt)
    write_text_atomic(folder / "script.py", code)

    def run() -> dict[str, Any]:
        import shutil

        exec_dir = folder / "exec"
        if exec_dir.exists():  # a run cut off mid-flight is redone from scratch
            shutil.rmtree(exec_dir)
        return run_script(state.task, code, run_dir=exec_dir, timeout=state.config.timeout,
                          memory_mb=state.config.memory_mb).to_dict()

    return RunResult.from_dict(state.journal.step(t, "execute", run, attempt=attempt))


def _record_model_error(state: DevelopState, t: int, role: str, error: Exception, attempt: int = 0) -> None:
    """Journal a mistake of the model's making once, also across resumes, and let the loop go on."""
    seen = any(r["role"] == "error" and r["iteration"] == t and r.get("source") == role and r["attempt"] == attempt
               for r in state.journal.records)
    if not seen:
        state.journal.append(t, "error", f"{role}: {error}", attempt=attempt, source=role)


def _consider(state: DevelopState, t: int, row: Iteration, code: str, result: RunResult, bank: Bank,
              plan_text: str) -> None:
    """Keep the best script; retain (task, script) and a retained insight when the test score improves."""
    row.status, row.valid, row.test = result.status, result.valid_metric, result.test_metric
    if result.ok:
        state.script = code
    if not (result.ok and state.task.metric.better(result.test_metric, state.best_test)):
        return
    state.best_test, state.best_valid, state.best_iteration = result.test_metric, result.valid_metric, t
    write_text_atomic(state.run_dir / "best_solution.py", code)
    row.retained = True

    def retain() -> dict[str, Any]:
        task = state.task
        solution = Case(kind="solution", text=task.description, title=f"{task.name} (retained, iteration {t})",
                        source_kind="retained", modality=task.modality, task_type=task.task_type,
                        task_name=task.name, script=code, metric=task.metric_name,
                        valid_score=result.valid_metric, test_score=result.test_metric,
                        extra={"run": state.run_dir.name, "iteration": t})
        insight = Case(kind="insight", text=f"Task: {task.description}\n\nPlan: {plan_text}\n\nLog: {row.log}",
                       title=f"retained insight from {task.name}", competition=task.name, source_kind="retained",
                       modality=task.modality, task_type=task.task_type, extra={"run": state.run_dir.name})
        report = bank.add([solution, insight])
        return {"solution": solution.id, "insight": insight.id, "added": len(getattr(report, "added", []) or [])}

    state.journal.step(t, "retain", retain)


def _finish(state: DevelopState, model: str, ledger: Any = None) -> dict[str, Any]:
    errors = state.journal.errors()
    summary: dict[str, Any] = {
        "task": state.task.name, "model": model, "metric": state.task.metric_name,
        "direction": state.task.direction, "iterations": len(state.rows), "best_iteration": state.best_iteration,
        "best_test": state.best_test, "best_valid": state.best_valid, "stopped": state.stopped or "completed",
        "run_dir": str(state.run_dir), "model_errors": errors,
        "best_solution": str(state.run_dir / "best_solution.py") if state.best_iteration else None,
    }
    if ledger is not None:
        totals = ledger.summary()
        summary["cost_usd"] = round(float(totals.get("cost", 0.0)), 6)
        summary["tokens"] = int(totals.get("prompt_tokens", 0)) + int(totals.get("completion_tokens", 0))
    write_report(state.run_dir, f"cbr develop: {state.task.name}", [asdict(r) for r in state.rows], summary)
    import json

    write_text_atomic(state.run_dir / "summary.json", json.dumps(summary, indent=2, default=str))
    return summary


def _new_state(task: Task, config: DevelopConfig, run_dir: Path) -> DevelopState:
    return DevelopState(task=task, config=config, run_dir=run_dir, journal=Journal(run_dir),
                        script=task.starter.read_text(encoding="utf-8"))


def develop_without_model(task: Task, config: DevelopConfig, run_dir: Path, bank: Bank,
                          progress: Progress | None = None) -> dict[str, Any]:
    """Case-based model search: adapt the t-th most similar solution case, run it, keep the best."""
    from dsagent_cbr.agent.adapter import AdapterError, CaseSolution, adapt_solution

    progress = progress or _Quiet()
    state = _new_state(task, config, run_dir)

    def retrieve() -> list[dict[str, Any]]:
        hits = bank.search(task.description, kind="solution", k=config.iterations, exclude_task=task.name,
                           where={"modality": task.modality})
        return [{**h.case.to_dict(), "score": h.score} for h in hits]

    cases = state.journal.step(0, "retrieve", retrieve)
    for t in range(1, config.iterations + 1):
        row = Iteration(iteration=t)
        state.rows.append(row)
        if t > len(cases):
            row.status = "no case left"
            continue
        case = Case.from_dict(cases[t - 1])
        row.case, row.step = case.task_name or case.id, f"adapt {case.task_name or case.id}"
        progress.update(iteration=t, role="adapt", best=state.best_test)

        def adapt(case: Case = case) -> dict[str, Any]:
            try:
                adapted = adapt_solution(CaseSolution(case.script, case.modality, case.task_type, case.metric,
                                                      case.task_name), task)
            except AdapterError as exc:
                return {"error": str(exc)}
            return {"code": adapted.code, "notes": adapted.notes}

        adapted = state.journal.step(t, "adapt", adapt)
        if "error" in adapted:
            row.status, row.log = "not adaptable", adapted["error"]
            continue
        progress.update(iteration=t, role="execute", best=state.best_test)
        result = _execute(state, t, 0, adapted["code"])
        row.log = (f"Adapted {row.case} ({'; '.join(adapted['notes']) or 'same task type'}): {result.status}, "
                   f"validation {result.valid_metric}, test {result.test_metric}.")
        state.log.append(row.log)
        _consider(state, t, row, adapted["code"], result, bank, row.step)
        _finish(state, "none")
    return _finish(state, "none")


def develop_with_model(task: Task, config: DevelopConfig, run_dir: Path, bank: Bank, client: Any,
                       progress: Progress | None = None) -> dict[str, Any]:
    from dsagent_cbr.llm.client import BudgetExceeded

    progress = progress or _Quiet()
    state = _new_state(task, config, run_dir)
    ledger = getattr(client, "ledger", None)

    def retrieve() -> list[dict[str, Any]]:
        if not config.cbr:
            return []
        from dsagent_cbr.bank.doctext import task_query

        hits = bank.search(task_query(task.description, task.modality), kind="insight", k=config.k)
        return [{**h.case.to_dict(), "score": h.score} for h in hits]

    cases = [Case.from_dict(c) for c in state.journal.step(0, "retrieve", retrieve)]

    def say(t: int, role: str, attempt: int = 0) -> None:
        totals = ledger.summary() if ledger is not None else {}
        progress.update(iteration=t, role=role, attempt=attempt, best=state.best_test,
                        tokens=int(totals.get("prompt_tokens", 0)) + int(totals.get("completion_tokens", 0)),
                        cost=float(totals.get("cost", 0.0)))

    try:
        for t in range(1, config.iterations + 1):
            _llm_iteration(state, t, client, cases, bank, say)
            _finish(state, getattr(client, "model", "?"), ledger)
    except BudgetExceeded as exc:
        state.stopped = f"budget: {exc}"
    return _finish(state, getattr(client, "model", "?"), ledger)


def _llm_iteration(state: DevelopState, t: int, client: Any, cases: list[Case], bank: Bank, say: Any) -> None:
    """One pass of Algorithm 1's loop body. Model mistakes are journaled and the loop goes on."""
    from dsagent_cbr.agent import roles
    from dsagent_cbr.llm.parsing import ParseError

    task, config, journal = state.task, state.config, state.journal
    row = Iteration(iteration=t)
    state.rows.append(row)
    log_text = "\n\n".join(state.log) or "(no experiments yet)"

    order = list(range(len(cases)))
    if cases and config.rerank:
        say(t, "rerank")
        try:
            order = journal.step(t, "rerank", lambda: roles.rerank(client, task, log_text, cases, config.temperature))
        except ParseError as exc:
            _record_model_error(state, t, "rerank", exc)
    top = cases[order[0]] if cases else None
    row.case = (top.competition or top.title or top.id) if top else "(no case)"

    say(t, "plan")
    try:
        plan = journal.step(t, "plan", lambda: roles.plan(
            client, task, log_text, state.script, top.text if top else None, config.temperature))
    except ParseError as exc:
        _record_model_error(state, t, "plan", exc)
        row.status = "no plan"
        return
    decision = plan["decision"]
    row.step = decision
    write_text_atomic(step_dir(state.run_dir, t) / "plan.md", plan.get("raw") or decision)

    say(t, "program")
    previous_script = state.script
    try:
        code = journal.step(t, "program", lambda: roles.program(
            client, task, previous_script, decision, config.temperature))
    except ParseError as exc:
        _record_model_error(state, t, "program", exc)
        row.status = "no script"
        state.log.append(f"Iteration {t}: the programmer returned no usable script.")
        return

    say(t, "execute")
    result = _execute(state, t, 0, code)
    attempt = 0
    while not result.ok and attempt < config.n_debug:
        attempt += 1
        say(t, "debug", attempt)
        failing, feedback = code, result.feedback()
        try:
            code = journal.step(t, "debug", lambda failing=failing, feedback=feedback: roles.debug(
                client, task, previous_script, decision, failing, feedback, log_text, config.temperature),
                attempt=attempt)
        except ParseError as exc:
            _record_model_error(state, t, "debug", exc, attempt)
            continue
        say(t, "execute", attempt)
        result = _execute(state, t, attempt, code)
    row.debug_attempts = attempt
    if not result.ok:
        _record_model_error(state, t, "execute", RuntimeError(result.error or result.status))

    say(t, "log")
    try:
        entry = journal.step(t, "log", lambda: roles.summarize(
            client, task, decision, previous_script, code, result.feedback(), config.temperature))
    except ParseError as exc:
        _record_model_error(state, t, "log", exc)
        entry = (f"Experiment Summary: {decision}\nExperiment Result: {result.status}, "
                 f"validation {result.valid_metric}, test {result.test_metric}")
    row.log = entry
    state.log.append(f"Iteration {t}:\n{entry}")
    _consider(state, t, row, code, result, bank, decision)
