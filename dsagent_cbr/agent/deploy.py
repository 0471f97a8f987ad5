"""`cbr deploy`: the deployment stage, as the paper's Algorithm 2, with the structural adapter as a
safety net. The result keeps the paper's one-pass measure (the LLM's first script ran and was
graded) apart from final success (a graded result, whoever wrote the script), and both apart from a
failure of ours (the model server never reached, the budget spent): that is no run of the model's."""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.agent import roles
from dsagent_cbr.agent.candidates import solution_candidates
from dsagent_cbr.agent.context import Context
from dsagent_cbr.agent.journal import write_text_atomic
from dsagent_cbr.agent.rundir import IMPORTANCE, publish_outputs, write_summary
from dsagent_cbr.agent.search import adapt_case
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.errors import CbrError
from dsagent_cbr.llm.ledger import BudgetExceeded
from dsagent_cbr.llm.parsing import ParseError, extract_code
from dsagent_cbr.runner.result import RunResult
from dsagent_cbr.runner.run import run_script
from dsagent_cbr.runner.sandbox import SandboxPolicy
from dsagent_cbr.runner.scratch import clear_folder
from dsagent_cbr.tasks.model import Task

FALLBACK_CANDIDATES = 3  # the adapter walks at most this many compatible solutions before giving up


@dataclass
class DeployConfig:
    strategy: str = "cbr"  # cbr | zero-shot | one-shot-random
    cases: int = 1
    temperature: float = 0.7
    fallback: bool = True
    seed: int = 0
    refit: bool = False
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)


@dataclass
class DeployResult:
    task: str
    model: str
    strategy: str
    outcome: str  # agent: the model (or the adapter) had its run | infrastructure | budget: ours, not counted
    one_pass: bool | None  # None: no LLM script was asked for, or the model was never reached
    final_success: bool
    solved_by: str  # llm | adapter | none
    metric: str
    direction: str
    valid_metric: float | None
    test_metric: float | None
    test_answers: bool
    seed: int
    retrieved: list[dict[str, Any]] = field(default_factory=list)
    llm_error: str | None = None
    adapter_notes: list[str] = field(default_factory=list)
    adapter_error: str | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    sandbox: dict[str, Any] = field(default_factory=dict)
    run_dir: str = ""
    submission: str | None = None
    best_solution: str | None = None
    refit: dict[str, Any] | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)  # every script run, in order: the report's rows

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose_examples(task: Task, bank: Any, config: DeployConfig) -> list[tuple[Case, float | None]]:
    """The example solutions for the prompt: the nearest compatible ones, a random one, or none."""
    if config.strategy == "zero-shot":
        return []
    if config.strategy == "one-shot-random":
        pool = [c for c in bank.list("solution") if c.task_name != task.name]
        rng = random.Random(config.seed)
        return [(c, None) for c in rng.sample(pool, min(config.cases, len(pool)))]
    return [(c, s) for c, s in solution_candidates(bank, task, config.cases)]


def _starter_of(case: Case, tasks_dir: Path) -> str:
    starter = tasks_dir / case.task_name / "train.py"
    return starter.read_text(encoding="utf-8") if starter.is_file() else "(starter not available)"


def _run(task: Task, code: str, folder: Path, config: DeployConfig, result: DeployResult, step: str,
         case: str) -> RunResult:
    clear_folder(folder)
    run = run_script(task, code, run_dir=folder, policy=config.policy)
    result.attempts.append({"iteration": len(result.attempts) + 1, "case": case, "step": step, "status": run.status,
                            "error": run.error, "valid": run.valid_metric, "test": run.test_metric,
                            "wall_time": run.wall_time, "retained": False,
                            "script": str(Path(folder.name) / "script.py")})
    return run


def deploy(task: Task, config: DeployConfig, run_dir: Path, bank: Any, model: roles.Model | None,
           tasks_dir: Path) -> DeployResult:
    examples = choose_examples(task, bank, config) if model is not None else []
    result = DeployResult(task=task.name, model=model.model if model else "none", strategy=config.strategy,
                          outcome="agent", one_pass=None, final_success=False, solved_by="none",
                          metric=task.metric_name, direction=task.direction, valid_metric=None, test_metric=None,
                          test_answers=task.has_answers, seed=config.seed, sandbox=config.policy.describe(),
                          run_dir=str(run_dir))
    result.retrieved = [{"id": c.id, "task": c.task_name, "source": c.source_kind, "similarity": s}
                        for c, s in examples]
    final: RunResult | None = None
    if model is not None:
        final = _ask_model(task, config, run_dir, model, examples, tasks_dir, result)
    if final is None and result.outcome == "agent" and (model is None or config.fallback):
        final = _adapter_fallback(task, config, run_dir, bank, result)
    if final is not None:
        result.final_success = True
        result.valid_metric, result.test_metric = final.valid_metric, final.test_metric
        result.best_solution = str(run_dir / "best_solution.py")
        result.submission = str(run_dir / task.predictions) if task.predictions else None
        if config.refit:
            _refit(task, config, run_dir, result)
    if model is not None:
        usage = model.usage()
        result.tokens, result.cost_usd = usage.get("tokens", 0), usage.get("cost_usd", 0.0)
    write_text_atomic(run_dir / "result.json", json.dumps(result.to_dict(), indent=2, default=str))
    write_summary(run_dir, f"cbr deploy: {task.name}", result.attempts, _summary(task, result))
    return result


def _summary(task: Task, result: DeployResult) -> dict[str, Any]:
    """result.json in the shape of develop's summary, for the report and the trackers."""
    best = next((a["iteration"] for a in result.attempts if a["status"] == "ok"), None) if result.final_success else None
    importance = Path(result.run_dir) / IMPORTANCE
    return {"task": task.name, "model": result.model, "metric": task.metric_name, "direction": task.direction,
            "iterations": len(result.attempts), "best_iteration": best, "best_valid": result.valid_metric,
            "best_test": result.test_metric, "test_answers": result.test_answers, "selected_by": "first graded run",
            "stopped": "completed" if result.outcome == "agent" else result.outcome, "outcome": result.outcome,
            "one_pass": result.one_pass, "solved_by": result.solved_by, "run_dir": result.run_dir,
            "best_solution": result.best_solution, "submission": result.submission, "refit": result.refit,
            "tokens": result.tokens, "cost_usd": result.cost_usd, "model_errors": [],
            "feature_importance": str(importance) if importance.is_file() else None}


def _refit(task: Task, config: DeployConfig, run_dir: Path, result: DeployResult) -> None:
    """--refit: the final script once more, trained on the validation rows too; its predictions are
    the submission (its validation score means nothing then)."""
    code = (run_dir / "best_solution.py").read_text(encoding="utf-8")
    if "CBR_REFIT" not in code:
        result.refit = {"status": "skipped", "why": "the script does not read CBR_REFIT"}
        return
    folder = run_dir / "refit"
    clear_folder(folder)
    run = run_script(task, code, run_dir=folder, policy=config.policy, refit=True)
    result.refit = {"status": run.status, "error": run.error, "test_after_refit": run.test_metric}
    if run.ok:
        publish_outputs(run_dir, task, code, Path(run.workspace))


def _ask_model(task: Task, config: DeployConfig, run_dir: Path, model: roles.Model,
               examples: list[tuple[Case, float | None]], tasks_dir: Path, result: DeployResult) -> RunResult | None:
    """Algorithm 2's single call and the run of its script; None when it did not give a graded result."""
    ctx = Context.of(task, config.policy)
    messages = roles.adapt_messages(ctx, [(c.text, _starter_of(c, tasks_dir), c.script) for c, _ in examples])
    write_text_atomic(run_dir / "prompt.md", "\n\n".join(f"## {m['role']}\n\n{m['content']}" for m in messages))
    try:
        reply = model.complete("adapt", messages, temperature=config.temperature, validate=extract_code)
    except ParseError as exc:  # the model answered, without a script: its one pass failed
        write_text_atomic(run_dir / "reply.md", exc.raw)
        result.one_pass, result.llm_error = False, str(exc)
        return None
    except BudgetExceeded as exc:
        result.outcome, result.llm_error = "budget", str(exc)
        return None
    except CbrError as exc:  # the model was never reached: a failure of ours, not a run of the model's
        result.outcome, result.llm_error = "infrastructure", str(exc)
        return None
    write_text_atomic(run_dir / "reply.md", reply.text)
    example = examples[0][0].task_name if examples else "(no example)"
    first = _run(task, reply.parsed, run_dir / "llm-run", config, result, "the model's script (one pass)", example)
    result.one_pass = first.ok
    if not first.ok:
        result.llm_error = f"{first.status}: {first.error}"
        write_text_atomic(run_dir / "llm_solution.py", reply.parsed)
        return None
    result.solved_by = "llm"
    publish_outputs(run_dir, task, reply.parsed, Path(first.workspace))
    return first


def _adapter_fallback(task: Task, config: DeployConfig, run_dir: Path, bank: Any,
                      result: DeployResult) -> RunResult | None:
    """Walk the compatible solutions, nearest first, with the structural adapter; the first graded run
    wins. At most FALLBACK_CANDIDATES are tried."""
    errors = []
    for i, (case, _) in enumerate(solution_candidates(bank, task, FALLBACK_CANDIDATES)):
        adapted = adapt_case(case, task)
        if "error" in adapted:
            errors.append(f"{case.task_name}: {adapted['error']}")
            continue
        run = _run(task, adapted["code"], run_dir / f"adapter-run-{i}", config, result,
                   f"structural adapter on {case.task_name}", case.task_name)
        if run.ok:
            result.solved_by, result.adapter_notes = "adapter", [f"case {case.task_name} ({case.source_kind})",
                                                                 *adapted["notes"]]
            publish_outputs(run_dir, task, adapted["code"], Path(run.workspace))
            return run
        errors.append(f"{case.task_name}: {run.status}: {run.error}")
    result.adapter_error = "; ".join(errors) or "no compatible solution case to adapt"
    return None
