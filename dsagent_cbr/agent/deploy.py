"""`cbr deploy`: the deployment stage, as the paper's Algorithm 2, with the structural adapter as a
safety net. The result keeps the paper's one-pass measure (the LLM's first script ran and was
graded) apart from final success (a graded result, whoever wrote the script)."""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.agent.adapter import AdapterError, CaseSolution, adapt_solution
from dsagent_cbr.agent.journal import write_text_atomic
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.errors import CbrError
from dsagent_cbr.runner.result import RunResult
from dsagent_cbr.runner.run import run_script
from dsagent_cbr.tasks.model import Task

STRATEGIES = ("cbr", "zero-shot", "one-shot-random")


@dataclass
class DeployConfig:
    strategy: str = "cbr"
    cases: int = 1
    temperature: float = 0.7
    fallback: bool = True
    timeout: float = 600.0
    memory_mb: float = 8192.0
    seed: int = 0


@dataclass
class DeployResult:
    task: str
    model: str
    strategy: str
    one_pass: bool | None  # None: no LLM was asked
    final_success: bool
    solved_by: str  # llm | adapter | none
    metric: str
    direction: str
    valid_metric: float | None
    test_metric: float | None
    retrieved: list[dict[str, Any]] = field(default_factory=list)
    llm_error: str | None = None
    adapter_notes: list[str] = field(default_factory=list)
    adapter_error: str | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    run_dir: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose_cases(task: Task, bank: Any, config: DeployConfig) -> list[tuple[Case, float | None]]:
    """The example solution cases for the prompt: nearest by description, a random one, or none."""
    if config.strategy == "zero-shot":
        return []
    if config.strategy == "one-shot-random":
        pool = [c for c in bank.list("solution") if c.task_name != task.name]
        rng = random.Random(config.seed)
        return [(c, None) for c in rng.sample(pool, min(config.cases, len(pool)))]
    hits = bank.search(task.description, kind="solution", k=max(config.cases, 5), exclude_task=task.name)
    same = [h for h in hits if h.case.modality == task.modality] or hits
    return [(h.case, h.score) for h in same[: config.cases]]


def _starter_of(case: Case, tasks_dir: Path) -> str:
    starter = tasks_dir / case.task_name / "train.py"
    return starter.read_text(encoding="utf-8") if starter.is_file() else "(starter not available)"


def _run(task: Task, code: str, folder: Path, config: DeployConfig) -> RunResult:
    if folder.exists():
        shutil.rmtree(folder)
    return run_script(task, code, run_dir=folder, timeout=config.timeout, memory_mb=config.memory_mb)


def _keep_outputs(run_dir: Path, task: Task, code: str, result: RunResult) -> None:
    write_text_atomic(run_dir / "solution.py", code)
    if task.predictions:
        produced = Path(result.workspace) / task.predictions
        if produced.is_file():
            shutil.copy2(produced, run_dir / task.predictions)


def deploy(task: Task, config: DeployConfig, run_dir: Path, bank: Any, client: Any | None,
           tasks_dir: Path) -> DeployResult:
    from dsagent_cbr.agent import roles

    model = getattr(client, "model", "none") if client is not None else "none"
    examples = choose_cases(task, bank, config) if (client is not None or config.strategy == "cbr") else []
    if client is None:
        examples = examples or choose_cases(task, bank, DeployConfig(cases=3))
    result = DeployResult(task=task.name, model=model, strategy=config.strategy, one_pass=None,
                          final_success=False, solved_by="none", metric=task.metric_name, direction=task.direction,
                          valid_metric=None, test_metric=None, run_dir=str(run_dir),
                          retrieved=[{"id": c.id, "task": c.task_name, "similarity": s} for c, s in examples])
    final: RunResult | None = None
    if client is not None:
        from dsagent_cbr.llm.parsing import ParseError

        messages = roles.adapt_messages(task, [(c.text, _starter_of(c, tasks_dir), c.script) for c, _ in examples])
        write_text_atomic(run_dir / "prompt.md", "\n\n".join(f"## {m['role']}\n\n{m['content']}" for m in messages))
        try:
            reply = client.complete("adapt", messages, temperature=config.temperature)
            write_text_atomic(run_dir / "reply.md", reply.text)
            code = roles.extract_script(reply.text)
        except (ParseError, CbrError) as exc:  # a failed call counts against one-pass like a bad script
            result.one_pass, result.llm_error = False, str(exc)
        else:
            first = _run(task, code, run_dir / "llm-run", config)
            result.one_pass = first.ok
            if first.ok:
                final, result.solved_by = first, "llm"
                _keep_outputs(run_dir, task, code, first)
            else:
                result.llm_error = f"{first.status}: {first.error}"
                write_text_atomic(run_dir / "llm_solution.py", code)
    if final is None and (client is None or config.fallback):
        final = _adapter_fallback(task, examples, config, run_dir, result)
    if final is not None:
        result.final_success = True
        result.valid_metric, result.test_metric = final.valid_metric, final.test_metric
    ledger = getattr(client, "ledger", None)
    if ledger is not None:
        totals = ledger.summary()
        result.tokens = int(totals.get("prompt_tokens", 0)) + int(totals.get("completion_tokens", 0))
        result.cost_usd = round(float(totals.get("cost", 0.0)), 6)
    write_text_atomic(run_dir / "result.json", json.dumps(result.to_dict(), indent=2, default=str))
    return result


def _adapter_fallback(task: Task, examples: list[tuple[Case, float | None]], config: DeployConfig, run_dir: Path,
                      result: DeployResult) -> RunResult | None:
    """Try the retrieved cases in order with the structural adapter; the first graded run wins."""
    errors = []
    for i, (case, _) in enumerate(examples):
        try:
            adapted = adapt_solution(CaseSolution(case.script, case.modality, case.task_type, case.metric,
                                                  case.task_name), task)
        except AdapterError as exc:
            errors.append(f"{case.task_name}: {exc}")
            continue
        run = _run(task, adapted.code, run_dir / f"adapter-run-{i}", config)
        if run.ok:
            result.solved_by, result.adapter_notes = "adapter", [f"case {case.task_name}", *adapted.notes]
            _keep_outputs(run_dir, task, adapted.code, run)
            return run
        errors.append(f"{case.task_name}: {run.status}: {run.error}")
    result.adapter_error = "; ".join(errors) or "no solution case to adapt"
    return None
