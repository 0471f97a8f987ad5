"""`cbr develop`: the development stage, as the paper's Algorithm 1.

    l0 = the starter's result
    for t in 1..T:
        cases  = retrieve(task + log)                 top-k insights, none retained from this task
        order  = rerank(task, log, case summaries)    the model's permutation (retrieval order without)
        plan   = plan(task, log, script, best case)   Reflection, Reasoning, Thought, Check, Decision
        code   = program(script, plan)
        result = execute(code); debug up to N times while it fails
        log   += summarize(plan, diff, result, best selection score so far)
        retain (task, code) when the selection score improves

Retained when the selection score improves, not the test score as the paper's code did: the model
never sees a test score and nothing is chosen by one (run.py keeps the best row by its selection score).

Mistakes of the model (a reply with no plan, no code, an unusable ranking) are journaled with the raw
reply and the loop goes on; the budget, an interrupt and failures of ours (a dead server, no sandbox)
end the run as errors.py says, keeping everything done so far."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.agent import roles
from dsagent_cbr.agent.context import Context
from dsagent_cbr.agent.record import Kind, Row, RunRecord, Status
from dsagent_cbr.agent.run import Run
from dsagent_cbr.agent.rundir import step_dir
from dsagent_cbr.agent.seams import Bank, Executor, Model, Observer, Progress, SandboxExecutor
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.clock import Clock
from dsagent_cbr.files import write_text_atomic
from dsagent_cbr.harness.result import RunResult
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
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
    refit: bool = True  # the submission learns from every labelled row unless --no-refit
    retain: bool = True  # --no-retain: the run adds nothing to the bank
    # --budget: wall-clock seconds for the search (the node cap is `iterations`)
    budget: float | None = None
    parallel: int = 1  # --parallel: the search's nodes at once (search/parallel.py)
    address: str | None = None  # --address: the Ray cluster its nodes' scripts run on
    # --in-turn: a model's node takes a plain node's place, not one of its own beside them
    in_turn: bool = False
    # `cbr refit`: the run resumed to refit its selection, with no new node
    refit_only: bool = False
    policy: dict[str, Any] = field(default_factory=lambda: asdict(SandboxPolicy()))

    @property
    def sandbox(self) -> SandboxPolicy:
        return SandboxPolicy(**self.policy)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DevelopConfig:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def open_run(
    kind: Kind,
    task: Task,
    config: DevelopConfig,
    run_dir: Path,
    bank: Bank,
    executor: Executor | None,
    progress: Progress | None,
    model: Model | None = None,
    reference: float | None = None,
    observers: Sequence[Observer] = (),
    clock: Clock | None = None,
) -> Run:
    """The run of develop or the search, with the sandbox as its executor unless a test gives one."""
    return Run(
        kind,
        task,
        run_dir,
        bank,
        executor or SandboxExecutor(task, config.sandbox),
        model=model,
        progress=progress,
        planned=None if config.budget else config.iterations,
        seed=config.seed,
        sandbox=config.policy,
        refit=config.refit,
        reference=reference,
        retain=config.retain,
        observers=observers,
        clock=clock or Clock(config.budget),
    )


@dataclass
class Memory:
    """What develop's prompts carry from one iteration to the next."""

    script: str  # the last script that ran; the programmer edits it next
    log: list[str] = field(default_factory=list)
    simpler: bool = False  # debugging gave up last time: ask the planner for a simpler step

    def log_text(self) -> str:
        return "\n\n".join(self.log) or INITIAL_LOG


def best_text(run: Run) -> str:
    """The best score so far, as the planner and the logger are told it: the selection score, which
    the model sees as a competitor sees a public leaderboard (the test score it never sees)."""
    judged = (
        "selection score, graded by cbr on held-back rows"
        if run.record.selected_by == "selection"
        else "the script's printed validation"
    )
    if run.best is not None and run.best.score is not None:
        return f"{run.best.score:.6g} ({judged}; iteration {run.best.iteration})"
    start = (
        f"; the starter's random guess scored {run.baseline:.6g}"
        if run.baseline is not None
        else ""
    )
    return f"none yet{start}"


def timings_text(run: Run) -> str:
    """How long the scripts took on this task, for a plan to weigh against the budget."""
    parts = [f"the starter {run.starter_seconds:.1f} s"] if run.starter_seconds is not None else []
    if run.best is not None and run.best.wall_time is not None:
        parts.append(f"the best script (iteration {run.best.iteration}) {run.best.wall_time:.1f} s")
    last = next((r for r in reversed(run.rows[:-1]) if r.wall_time is not None), None)
    if last is not None and last is not run.best:
        parts.append(f"the last script run (iteration {last.iteration}) {last.wall_time:.1f} s")
    return "; ".join(parts)


def develop_with_model(
    task: Task,
    config: DevelopConfig,
    run_dir: Path,
    bank: Bank,
    model: Model,
    executor: Executor | None = None,
    progress: Progress | None = None,
    reference: float | None = None,
    observers: Sequence[Observer] = (),
    clock: Clock | None = None,
) -> RunRecord:
    """Algorithm 1. Returns the run's record (also written to summary.json). `clock`: the command's."""
    from dsagent_cbr.bank.doctext import task_query

    clock = clock or Clock(config.budget)
    run = open_run(
        "develop",
        task,
        config,
        run_dir,
        bank,
        executor,
        progress,
        model,
        reference,
        observers,
        clock,
    )
    ctx = Context.of(task, config.sandbox)
    memory = Memory(script=task.starter.read_text(encoding="utf-8"))
    query = task_query(task.description, task.modality)
    with run.stopping():
        first = run.baseline_run()
        memory.log.append(
            f"Iteration 0 (the starter script, a random guess): {first.feedback().splitlines()[0]}"
        )
        for t in range(1, config.iterations + 1):
            if clock.exhausted():
                run.record.stopped = f"{clock.spent()} after {t - 1} iteration(s)"
                break
            develop_iteration(run, memory, ctx, model, config, t, query)
            run.end(run.rows[-1])
    return run.close()


def retrieve(run: Run, config: DevelopConfig, t: int, query: str) -> list[Case]:
    """The k nearest insight cases, none retained from this task; none in the no-CBR ablation."""
    if not config.cbr:
        return []

    def search() -> list[dict[str, Any]]:  # a text retained twice is one case: never shown twice
        found, seen = [], set()
        for h in run.bank.search(query, kind="insight", k=2 * config.k, exclude_task=run.task.name):
            text = " ".join(h.case.text.split())
            if text not in seen:
                seen.add(text)
                found.append({**h.case.to_dict(), "score": h.score})
        return found[: config.k]

    return [Case.from_dict(c) for c in run.journal.step(t, "retrieve", search)]


@dataclass(frozen=True)
class Asking:
    """What each step that asks the model works with: the run it records in, the model, what the model
    is told of the task, and the loop's settings."""

    run: Run
    model: Model
    ctx: Context
    cfg: DevelopConfig


def best_case(asking: Asking, t: int, query: str, log: str) -> Case | None:
    """Retrieve by the task and the log, let the model rerank, and take the case it puts first."""
    run, cfg = asking.run, asking.cfg
    cases = retrieve(run, cfg, t, f"{query}\n{log}")
    order = list(range(len(cases)))
    if cases and cfg.rerank:
        rerank = lambda: roles.rerank(asking.model, asking.ctx, log, cases, cfg.temperature)  # noqa: E731
        order = run.ask(t, "rerank", rerank) or order
    return cases[order[0]] if cases else None


def case_name(case: Case | None) -> str:
    return (case.competition or case.title or case.id) if case else "(no case)"


def plan_and_program(
    asking: Asking,
    row: Row,
    log: str,
    script: str,
    case: Case | None,
    simpler: bool = False,
    *,
    draft: bool = False,
    named: Callable[[str], str] | None = None,
    searching: bool = False,
) -> tuple[str, str] | None:
    """One step planned from the case for `script` and programmed: (the plan's text, the new script).
    `draft`: a new solution in the frame of `script`, the starter. `named`: the scripts a plan's decision
    names, for the coder (the search's nodes). `searching`: a node of the search, planned beside its
    plain moves (roles.plan). None when the model gave no usable plan or script (the row says which)."""
    run, model, ctx, cfg = asking.run, asking.model, asking.ctx, asking.cfg
    t = row.iteration
    plan = run.ask(
        t,
        "plan",
        lambda: roles.plan(
            model,
            ctx,
            log,
            best_text(run),
            script,
            case,
            simpler,
            cfg.temperature,
            timings_text(run),
            draft=draft,
            searching=searching,
        ),
    )
    if plan is None:
        row.status = Status.NO_PLAN
        return None
    row.step = plan["decision"]
    write_text_atomic(step_dir(run.run_dir, t) / "plan.md", plan["raw"])
    code = run.ask(
        t,
        "program",
        lambda: roles.program(
            model,
            ctx,
            script,
            row.step,
            cfg.temperature,
            cfg.program_retries,
            draft=draft,
            named=named(row.step) if named else "",
        ),
    )
    if code is None:
        row.status = Status.NO_SCRIPT
        return None
    return plan["raw"], code


def develop_iteration(
    run: Run, memory: Memory, ctx: Context, model: Model, cfg: DevelopConfig, t: int, query: str
) -> None:
    """One pass of Algorithm 1's loop body."""
    row, log = run.begin(t), memory.log_text()
    asking = Asking(run, model, ctx, cfg)
    case = best_case(asking, t, query, log)
    row.case = case_name(case)
    before = memory.script
    # nothing graded yet: a new solution
    draft = before == run.task.starter.read_text(encoding="utf-8")
    planned = plan_and_program(asking, row, log, before, case, memory.simpler, draft=draft)
    if planned is None:
        if row.status == "no script":
            memory.log.append(f"Iteration {t}: the programmer returned no usable script.")
        return
    plan, code = planned
    code, result, ran = run_and_debug(asking, row, log, before, code)
    row.log = log_entry(asking, row, log, plan, before, code, result)
    memory.log.append(f"Iteration {t}:\n{row.log}")
    memory.simpler = not result.ok
    if result.ok:
        memory.script = code
    run.consider(row, code, result, ran, retain=row.step)


def run_and_debug(
    asking: Asking, row: Row, log: str, before: str, code: str
) -> tuple[str, RunResult, int]:
    """Run the iteration's script and, while it fails, ask the model for a fix up to `n_debug` times.
    Returns the last script run, its result and the attempt that ran it (0: the first script)."""
    run, model, ctx, cfg = asking.run, asking.model, asking.ctx, asking.cfg
    t = row.iteration
    result = run.execute(t, 0, code)
    attempt = 0
    ran = 0
    while not result.ok and attempt < cfg.n_debug:
        attempt += 1
        failing, error = code, result.feedback()
        fixed = run.ask(
            t,
            "debug",
            lambda failing=failing, error=error: roles.debug(
                model, ctx, before, row.step, failing, error, log, cfg.temperature
            ),
            attempt,
        )
        if fixed is not None:
            code = fixed
            result = run.execute(t, attempt, fixed)
            ran = attempt
    row.debug_attempts = attempt
    return code, result, ran


def log_entry(
    asking: Asking, row: Row, log: str, plan: str, before: str, code: str, result: RunResult
) -> str:
    """The iteration's entry in the log: the model's summary, or the step and its first line of feedback
    when the model gave none."""
    run, model, ctx, cfg = asking.run, asking.model, asking.ctx, asking.cfg
    entry = run.ask(
        row.iteration,
        "log",
        lambda: roles.summarize(
            model,
            ctx,
            log,
            best_text(run),
            plan,
            before,
            code,
            result.feedback(),
            result.stdout,
            cfg.temperature,
        ),
    )
    return (
        entry
        or f"Experiment Summary: {row.step}\nExperiment Result: {result.feedback().splitlines()[0]}"
    )
