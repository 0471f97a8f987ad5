"""`cbr develop`: the development stage, as the paper's Algorithm 1.

    l0 = the starter's result
    for t in 1..T:
        cases  = retrieve(task + log)                 top-k insights, none retained from this task
        order  = rerank(task, log, case summaries)    the model's permutation (retrieval order without)
        plan   = plan(task, log, script, best case)   Reflection, Reasoning, Thought, Check, Decision
        code   = program(script, plan)
        result = execute(code); debug up to N times while it fails
        log   += summarize(plan, diff, result, best validation so far)
        retain (task, code) when the validation score improves

One departure from the paper: it retained when the *test* score improved. Here the model never sees a
test score and nothing is selected by one: the best iteration, best_solution.py, submission.csv and
what is retained are all chosen by validation; the test score of that choice is only reported.

Mistakes of the model (a reply with no plan, no code, an unusable ranking) are journaled with the raw
reply and the loop goes on; the user's and the infrastructure's (a dead server, the budget, no sandbox)
stop the run with one sentence, keeping everything done so far."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dsagent_cbr.agent import roles
from dsagent_cbr.agent.context import Context, reference_valid
from dsagent_cbr.agent.journal import Journal, write_text_atomic
from dsagent_cbr.agent.rundir import IMPORTANCE, publish_outputs, step_dir, write_summary
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.errors import CbrError
from dsagent_cbr.llm.ledger import BudgetExceeded
from dsagent_cbr.llm.parsing import ParseError
from dsagent_cbr.runner.result import RunResult
from dsagent_cbr.runner.run import run_script
from dsagent_cbr.runner.sandbox import SandboxPolicy
from dsagent_cbr.runner.scratch import clear_folder
from dsagent_cbr.tasks.model import Task

INITIAL_LOG = "(no experiments yet)"


@dataclass
class DevelopConfig:
    iterations: int = 5
    k: int = 5
    n_debug: int = 5
    temperature: float = 0.5
    rerank: bool = True
    cbr: bool = True
    program_retries: int = 2
    seed: int = 0
    refit: bool = False
    policy: dict[str, Any] = field(default_factory=lambda: asdict(SandboxPolicy()))

    @property
    def sandbox(self) -> SandboxPolicy:
        return SandboxPolicy(**self.policy)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DevelopConfig:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class Executor(Protocol):
    def run(self, code: str, folder: Path, refit: bool = False) -> RunResult: ...


@dataclass
class SandboxExecutor:
    task: Task
    policy: SandboxPolicy

    def run(self, code: str, folder: Path, refit: bool = False) -> RunResult:
        clear_folder(folder)  # a run cut off mid-flight is redone from scratch
        return run_script(self.task, code, run_dir=folder, policy=self.policy, refit=refit)


class Bank(Protocol):
    def search(self, text: str, kind: str = ..., k: int = ..., where: dict | None = ...,
               exclude_task: str | None = ...) -> list[Any]: ...

    def add(self, cases: list[Case]) -> Any: ...


class Progress(Protocol):
    def update(self, **fields: Any) -> None: ...


class _Quiet:
    def update(self, **fields: Any) -> None:
        pass


@dataclass
class Iteration:
    iteration: int
    case: str = ""
    step: str = ""
    status: str = "not run"
    error: str | None = None
    debug_attempts: int = 0
    valid: float | None = None
    test: float | None = None  # reported only: never shown to the model, never used to choose
    wall_time: float | None = None
    retained: bool = False
    script: str | None = None
    log: str = ""


class DevelopRun:
    """The state of one run and its journaled effects; the loop bodies below read as the algorithm."""

    def __init__(self, task: Task, config: DevelopConfig, run_dir: Path, bank: Bank, executor: Executor,
                 progress: Progress | None = None, model_name: str = "none") -> None:
        self.task, self.config, self.run_dir, self.bank, self.executor = task, config, run_dir, bank, executor
        self.progress, self.model_name = progress or _Quiet(), model_name
        self.journal = Journal(run_dir)
        self.script = task.starter.read_text(encoding="utf-8")  # the last script that ran; edited next
        self.log: list[str] = []
        self.rows: list[Iteration] = []
        self.best: Iteration | None = None
        self.baseline: float | None = None
        self.simpler = False  # debugging gave up last time: ask the planner for a simpler step
        self.stopped = ""
        self.refit: dict[str, Any] | None = None
        self.usage: dict[str, Any] = {}

    # -- journaled effects -------------------------------------------------------------------------
    def ask(self, t: int, role: str, fn: Any, attempt: int = 0) -> Any:
        """A model step, once per (iteration, role, attempt) across resumes. A reply the model got wrong
        is journaled with its raw text and comes back as None; everything else propagates."""
        self.say(t, role, attempt)

        def guarded() -> dict[str, Any]:
            try:
                return {"value": fn()}
            except ParseError as exc:
                return {"error": str(exc), "raw": exc.raw}

        out = self.journal.step(t, role, guarded, attempt=attempt)
        if "error" in out:
            return None
        return out["value"]

    def execute(self, t: int, attempt: int, code: str) -> RunResult:
        self.say(t, "execute", attempt)
        folder = step_dir(self.run_dir, t, attempt)
        write_text_atomic(folder / "script.py", code)
        result = RunResult.from_dict(self.journal.step(t, "execute", lambda: self.executor.run(
            code, folder / "exec").to_dict(), attempt=attempt))
        return result

    def retrieve(self, t: int, query: str) -> list[Case]:
        def search() -> list[dict[str, Any]]:
            hits = self.bank.search(query, kind="insight", k=self.config.k, exclude_task=self.task.name)
            return [{**h.case.to_dict(), "score": h.score} for h in hits]

        return [Case.from_dict(c) for c in self.journal.step(t, "retrieve", search)] if self.config.cbr else []

    def say(self, t: int, role: str, attempt: int = 0) -> None:
        self.progress.update(iteration=t, total=self.config.iterations, role=role, attempt=attempt,
                             best=self.best.valid if self.best else None, tokens=self.usage.get("tokens"),
                             cost=self.usage.get("cost_usd"))

    def end(self, row: Iteration) -> dict[str, Any]:
        """An iteration is over: one progress line, and the summary and report written once."""
        self.progress.update(iteration=row.iteration, status=row.status, valid=row.valid,
                             best_valid=self.best.valid if self.best else None, metric=self.task.metric_name)
        return self.finish()

    # -- what the prompts are told -----------------------------------------------------------------
    def log_text(self) -> str:
        return "\n\n".join(self.log) or INITIAL_LOG

    def best_text(self) -> str:
        if self.best is not None:
            return f"{self.best.valid:.6g} (iteration {self.best.iteration})"
        start = f"; the starter's random guess scored {self.baseline:.6g}" if self.baseline is not None else ""
        return f"none yet{start}"

    # -- bookkeeping ---------------------------------------------------------------------------------
    def baseline_run(self) -> None:
        """Iteration 0: the starter as it is, so that the log and the report start from a number."""
        result = self.execute(0, 0, self.script)
        self.baseline = result.valid_metric if result.ok else None
        self.log.append(f"Iteration 0 (the starter script, a random guess): {result.feedback().splitlines()[0]}")

    def begin(self, t: int) -> Iteration:
        row = Iteration(iteration=t)
        self.rows.append(row)
        return row

    def consider(self, row: Iteration, code: str, result: RunResult, folder: Path, plan_text: str) -> None:
        """Record the outcome; keep and retain the script when its validation score is the best yet."""
        row.status, row.error, row.valid, row.test = result.status, result.error, result.valid_metric, result.test_metric
        row.wall_time, row.script = result.wall_time, str(folder.relative_to(self.run_dir) / "script.py")
        self.simpler = not result.ok
        if result.ok:
            self.script = code
        if not (result.ok and self.task.metric.better(result.valid_metric, self.best.valid if self.best else None)):
            return
        self.best, row.retained = row, True
        publish_outputs(self.run_dir, self.task, code, Path(result.workspace))
        self.journal.step(row.iteration, "retain", lambda: self._retain(row, code, plan_text))

    def _retain(self, row: Iteration, code: str, plan_text: str) -> dict[str, Any]:
        task = self.task
        solution = Case(kind="solution", text=task.description, title=f"{task.name} (retained, iteration {row.iteration})",
                        source_kind="retained", modality=task.modality, task_type=task.task_type,
                        task_name=task.name, script=code, metric=task.metric_name, valid_score=row.valid,
                        extra={"run": self.run_dir.name, "iteration": row.iteration})
        insight = Case(kind="insight", text=f"Task: {task.description}\n\nPlan: {plan_text}\n\nLog: {row.log}",
                       title=f"retained insight from {task.name}", competition=task.name, source_kind="retained",
                       modality=task.modality, task_type=task.task_type, task_name=task.name,
                       extra={"run": self.run_dir.name})
        report = self.bank.add([solution, insight])
        return {"solution": solution.id, "insight": insight.id, "added": len(getattr(report, "added", []) or [])}

    @contextlib.contextmanager
    def stopping(self, model: Any = None) -> Iterator[None]:
        """How a run ends early: the budget is a clean stop; an interrupt or a failure of ours (a dead
        server, no sandbox) discards the step in flight, saves the summary, and goes up to the caller."""
        try:
            yield
        except BudgetExceeded as exc:
            self.stopped = f"budget: {exc}"
        except (KeyboardInterrupt, CbrError) as exc:
            self.stopped = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"infrastructure: {exc}"
            self.discard_in_flight()
            self.usage = model.usage() if model is not None else self.usage
            self.finish()
            raise
        finally:
            self.usage = model.usage() if model is not None else self.usage

    def refit_best(self) -> None:
        """--refit: the selected script once more, told to learn from the validation rows too; its
        predictions become the submission. Its validation score means nothing then, and is not kept."""
        if not (self.config.refit and self.best and self.best.script):
            return
        code = (self.run_dir / self.best.script).read_text(encoding="utf-8")
        if "CBR_REFIT" not in code:
            self.refit = {"status": "skipped", "why": "the selected script does not read CBR_REFIT"}
            return
        self.say(self.best.iteration, "refit")
        folder = self.run_dir / "refit"
        result = RunResult.from_dict(self.journal.step(0, "refit", lambda: self.executor.run(
            code, folder / "exec", refit=True).to_dict()))
        self.refit = {"status": result.status, "error": result.error, "test_after_refit": result.test_metric}
        if result.ok:
            publish_outputs(self.run_dir, self.task, code, Path(result.workspace))

    def discard_in_flight(self) -> None:
        """After an interrupt: the iteration in flight leaves no row and no folder; resume redoes it."""
        if self.rows and self.rows[-1].status == "not run":
            t = self.rows.pop().iteration
            clear_folder(self.run_dir / f"step-{t:02d}")

    def finish(self) -> dict[str, Any]:
        best = self.best
        summary: dict[str, Any] = {
            "task": self.task.name, "model": self.model_name, "metric": self.task.metric_name,
            "direction": self.task.direction, "iterations": len(self.rows), "planned_iterations": self.config.iterations,
            "best_iteration": best.iteration if best else None, "best_valid": best.valid if best else None,
            "best_test": best.test if best else None, "test_answers": self.task.has_answers,
            "selected_by": "validation", "stopped": self.stopped or "completed", "run_dir": str(self.run_dir),
            "outcome": "infrastructure" if self.stopped.startswith("infrastructure") else "agent",
            "model_errors": self.journal.errors(),
            "baselines": {"starter": self.baseline, "reference": reference_valid(self.task)},
            "best_solution": str(self.run_dir / "best_solution.py") if best else None,
            "submission": str(self.run_dir / self.task.predictions) if best and self.task.predictions else None,
            "sandbox": self.config.policy, "refit": self.refit, **self.usage,
            "feature_importance": str(self.run_dir / IMPORTANCE) if (self.run_dir / IMPORTANCE).is_file() else None,
        }
        write_summary(self.run_dir, f"cbr develop: {self.task.name}", [asdict(r) for r in self.rows], summary)
        return summary


def develop_with_model(task: Task, config: DevelopConfig, run_dir: Path, bank: Bank, model: roles.Model,
                       executor: Executor | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Algorithm 1. Returns the run's summary (also written to summary.json)."""
    from dsagent_cbr.bank.doctext import task_query

    run = DevelopRun(task, config, run_dir, bank, executor or SandboxExecutor(task, config.sandbox), progress,
                     model.model)
    ctx = Context.of(task, config.sandbox)
    query = task_query(task.description, task.modality)
    with run.stopping(model):
        run.baseline_run()
        for t in range(1, config.iterations + 1):
            _iteration(run, ctx, model, t, query)
            run.usage = model.usage()
            run.end(run.rows[-1])
        run.refit_best()
    return run.finish()


def _iteration(run: DevelopRun, ctx: Context, model: roles.Model, t: int, query: str) -> None:
    """One pass of Algorithm 1's loop body."""
    cfg, row, log = run.config, run.begin(t), run.log_text()
    cases = run.retrieve(t, f"{query}\n{log}")
    order = list(range(len(cases)))
    if cases and cfg.rerank:
        order = run.ask(t, "rerank", lambda: roles.rerank(model, ctx, log, cases, cfg.temperature)) or order
    case = cases[order[0]] if cases else None
    row.case = (case.competition or case.title or case.id) if case else "(no case)"
    plan = run.ask(t, "plan", lambda: roles.plan(model, ctx, log, run.best_text(), run.script, case, run.simpler,
                                                  cfg.temperature))
    if plan is None:
        row.status = "no plan"
        return
    row.step = plan["decision"]
    write_text_atomic(step_dir(run.run_dir, t) / "plan.md", plan["raw"])
    before = run.script
    code = run.ask(t, "program", lambda: roles.program(model, ctx, before, row.step, cfg.temperature,
                                                        cfg.program_retries))
    if code is None:
        row.status = "no script"
        run.log.append(f"Iteration {t}: the programmer returned no usable script.")
        return
    result, attempt, ran = run.execute(t, 0, code), 0, 0
    while not result.ok and attempt < cfg.n_debug:
        attempt += 1
        failing, error = code, result.feedback()
        fixed = run.ask(t, "debug", lambda failing=failing, error=error: roles.debug(
            model, ctx, before, row.step, failing, error, log, cfg.temperature), attempt)
        if fixed is not None:
            code, result, ran = fixed, run.execute(t, attempt, fixed), attempt
    row.debug_attempts = attempt
    entry = run.ask(t, "log", lambda: roles.summarize(model, ctx, log, run.best_text(), row.step, before, code,
                                                       result.feedback(), cfg.temperature))
    row.log = entry or f"Experiment Summary: {row.step}\nExperiment Result: {result.feedback().splitlines()[0]}"
    run.log.append(f"Iteration {t}:\n{row.log}")
    run.consider(row, code, result, step_dir(run.run_dir, t, ran), row.step)
