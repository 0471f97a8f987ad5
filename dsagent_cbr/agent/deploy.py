"""`cbr deploy`: the deployment stage, as the paper's Algorithm 2, with the structural adapter as a
safety net. The result keeps the paper's one-pass measure (the LLM's first script ran and was
graded) apart from final success (a graded result, whoever wrote the script), and both apart from a
failure of ours (the model server never reached, the budget spent): that is no run of the model's.

    starter  = execute(the task's starter)                     the guess a solution must beat
    examples = nearest compatible (task, solution) pairs     (a random one, or none, for the baselines)
    code     = model(examples, task, data card, budget)       one call
    result   = execute(code)                                   one pass: graded or not
    if not graded better than the starter: adapt the nearest solutions structurally, the first graded
    better than the starter wins (a submission worse than a guess is no solution)"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dsagent_cbr.adapter import adapt_case
from dsagent_cbr.agent import roles
from dsagent_cbr.agent.candidates import solution_candidates
from dsagent_cbr.agent.context import Context
from dsagent_cbr.agent.record import DeployFacts, Row, RunRecord, Status
from dsagent_cbr.agent.run import FIRST_GRADED, Run
from dsagent_cbr.agent.seams import Bank, Executor, Model, Observer, Progress, SandboxExecutor
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.files import write_text_atomic
from dsagent_cbr.harness.result import RunResult
from dsagent_cbr.llm.parsing import ParseError, extract_code
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.tasks.model import Task

FALLBACK_CANDIDATES = 3  # the adapter walks at most this many compatible solutions before giving up


@dataclass
class DeployConfig:
    strategy: str = "cbr"  # cbr | zero-shot | one-shot-random
    cases: int = 1
    temperature: float = 0.7
    fallback: bool = True
    seed: int = 0
    refit: bool = True  # the submission learns from every labelled row unless --no-refit
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)


def deploy(
    task: Task,
    config: DeployConfig,
    run_dir: Path,
    bank: Bank,
    model: Model | None,
    tasks_dir: Path,
    executor: Executor | None = None,
    progress: Progress | None = None,
    reference: float | None = None,
    observers: Sequence[Observer] = (),
    adapt_first: Sequence[Case] = (),
) -> RunRecord:
    """Algorithm 2: one call adapts the nearest examples to the task and its script is run once; the
    structural adapter takes over when that gives no graded result (`adapt_first` before the bank's
    solutions). Returns the run's record."""
    run = Run(
        "deploy",
        task,
        run_dir,
        bank,
        executor or SandboxExecutor(task, config.policy),
        model=model,
        progress=progress,
        seed=config.seed,
        sandbox=config.policy.describe(),
        refit=config.refit,
        reference=reference,
        observers=observers,
    )
    run.record.selected_by = FIRST_GRADED
    facts = run.record.deploy = DeployFacts(strategy=config.strategy)
    with run.stopping():
        run.baseline_run()
        examples = choose_examples(task, bank, config) if model is not None else []
        facts.retrieved = [
            {"id": c.id, "task": c.task_name, "source": c.source_kind, "similarity": s}
            for c, s in examples
        ]
        solved = model is not None and ask_model(run, model, config, examples, tasks_dir)
        if not solved and (model is None or config.fallback):
            adapter_fallback(run, adapt_first)
    return run.close()


def choose_examples(
    task: Task, bank: Bank, config: DeployConfig
) -> list[tuple[Case, float | None]]:
    """The example solutions for the prompt: the nearest compatible ones, a random one, or none."""
    if config.strategy == "zero-shot":
        return []
    if config.strategy == "one-shot-random":
        pool = [c for c in bank.list("solution") if c.task_name != task.name]
        rng = random.Random(config.seed)
        return [(c, None) for c in rng.sample(pool, min(config.cases, len(pool)))]
    return [(c, s) for c, s in solution_candidates(bank, task, config.cases)]


def adapt_examples(cases: Sequence[Case], tasks_dir: Path | None) -> list[tuple[str, str, str]]:
    """The adapt prompt's examples: each past solution's task, its task's starter and its script."""
    return [(c.text, case_starter(c, tasks_dir), c.script) for c in cases]


def case_starter(case: Case, tasks_dir: Path | None) -> str:
    """The starter of a past solution's task, for the adapt prompt, when its folder is at hand."""
    if tasks_dir is None:
        return "(starter not available)"
    starter = tasks_dir / case.task_name / "train.py"
    return starter.read_text(encoding="utf-8") if starter.is_file() else "(starter not available)"


def _adapt_reply(
    model: Model, messages: list[dict[str, str]], temperature: float
) -> dict[str, str]:
    """The model's one reply, as the journal keeps it: its text and script, or why it holds no script."""
    try:
        reply = model.complete("adapt", messages, temperature=temperature, validate=extract_code)
    except ParseError as exc:
        return {"error": str(exc), "raw": exc.raw}
    return {"text": reply.text, "code": reply.parsed}


def ask_model(
    run: Run,
    model: Model,
    config: DeployConfig,
    examples: list[tuple[Case, float | None]],
    tasks_dir: Path,
) -> bool:
    """Algorithm 2's single call and the one run of its script: did it give a graded result?"""
    facts = run.record.deploy
    assert facts is not None
    ctx = Context.of(run.task, config.policy)
    messages = roles.adapt_messages(ctx, adapt_examples([c for c, _ in examples], tasks_dir))
    write_text_atomic(
        run.run_dir / "prompt.md",
        "\n\n".join(f"## {m['role']}\n\n{m['content']}" for m in messages),
    )
    run.say(1, "adapt")
    reply = run.journal.step(1, "adapt", lambda: _adapt_reply(model, messages, config.temperature))
    write_text_atomic(run.run_dir / "reply.md", reply.get("text", reply.get("raw", "")))
    if "error" in reply:  # the model answered, without a script: its one pass failed
        facts.one_pass, facts.llm_error = False, reply["error"]
        return False
    example = examples[0][0].task_name if examples else "(no example)"
    row = run.begin(1, candidate="llm", case=example, step="the model's script (one pass)")
    result = run.execute(1, 0, reply["code"])
    chosen = run.consider(row, reply["code"], result)
    facts.one_pass = result.ok  # the paper's measure: the model's first script ran and was graded
    if not chosen:
        facts.llm_error = not_taken(run, row, result)
        return False
    facts.solved_by = "llm"
    return True


def not_taken(run: Run, row: Row, result: RunResult) -> str:
    """Why a candidate's run was not taken, in words; a graded one no better than the starter's random
    guess is marked a failure in its row."""
    if not result.ok:
        return f"{result.status}: {result.error}"
    row.status = Status.WORSE_THAN_STARTER
    row.error = (
        f"graded {run.task.metric_name} {result.score:.6g}, no better than the starter's random guess "
        f"({run.baseline:.6g})"
    )
    return row.error


def adapter_fallback(run: Run, first: Sequence[Case] = ()) -> bool:
    """Walk `first`, then the compatible solutions, nearest first, with the structural adapter; the
    first graded run wins. At most FALLBACK_CANDIDATES of the bank's are tried."""
    facts = run.record.deploy
    assert facts is not None
    errors = []
    found = solution_candidates(run.bank, run.task, FALLBACK_CANDIDATES)
    for case in [*first, *(case for case, _ in found)]:
        adapted = adapt_case(case, run.task)
        if "error" in adapted:
            errors.append(f"{case.task_name}: {adapted['error']}")
            continue
        t = len(run.rows) + 1
        row = run.begin(
            t,
            candidate="adapter",
            case=case.task_name,
            step=f"structural adapter on {case.task_name}",
        )
        result = run.execute(t, 0, adapted["code"])
        if run.consider(row, adapted["code"], result):
            facts.solved_by = "adapter"
            facts.adapter_notes = [f"case {case.task_name} ({case.source_kind})", *adapted["notes"]]
            return True
        errors.append(f"{case.task_name}: {not_taken(run, row, result)}")
    facts.adapter_error = "; ".join(errors) or "no compatible solution case to adapt"
    return False
