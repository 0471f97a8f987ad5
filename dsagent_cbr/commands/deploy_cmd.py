"""`cbr deploy TASK_DIR --model M`: one-shot adaptation of the nearest past solution."""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dsagent_cbr.commands.options import (
    bank_options,
    json_option,
    mlflow_option,
    model_option,
    no_cache_option,
    policy_from,
    refit_option,
    runs_dir_option,
    sandbox_options,
    seed_option,
    settings_flags,
    trial_seed,
)
from dsagent_cbr.commands.printing import echo_results, say_score
from dsagent_cbr.config import load_settings

if TYPE_CHECKING:
    from dsagent_cbr.agent.deploy import DeployConfig
    from dsagent_cbr.agent.record import RunRecord
    from dsagent_cbr.bank.facade import CaseBank
    from dsagent_cbr.config import Settings
    from dsagent_cbr.tasks.model import Task


@click.command()
@click.argument("task_dir")
@model_option
@click.option(
    "--strategy",
    type=click.Choice(["cbr", "zero-shot", "one-shot-random"]),
    default="cbr",
    show_default=True,
    help="cbr: nearest solution; the paper's baselines otherwise.",
)
@click.option(
    "--cases", type=int, default=1, show_default=True, help="Example solutions in the prompt."
)
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option(
    "--fallback/--no-fallback",
    default=True,
    show_default=True,
    help="Let the structural adapter take over when the LLM's script fails.",
)
@sandbox_options
@seed_option
@bank_options
@runs_dir_option
@click.option("--max-cost", type=float, default=None, help="Refuse calls beyond this many dollars.")
@no_cache_option
@refit_option
@mlflow_option
@json_option
def deploy(
    task_dir: str,
    model: str | None,
    strategy: str,
    cases: int,
    temperature: float,
    fallback: bool,
    timeout: float,
    memory: float,
    disk: float,
    allow_network: bool,
    no_sandbox: bool,
    seed: int | None,
    store: str | None,
    bank_dir: Path | None,
    chroma_url: str | None,
    runs_dir: Path | None,
    max_cost: float | None,
    no_cache: bool,
    refit: bool,
    mlflow_uri: str | None,
    as_json: bool,
) -> None:
    """Solve TASK_DIR by adapting the most similar past (task, solution) pair in one shot."""
    from dsagent_cbr.agent.deploy import DeployConfig

    flags = settings_flags(model, store, bank_dir, chroma_url, runs_dir, max_cost, no_cache)
    config = DeployConfig(
        strategy=strategy,
        cases=cases,
        temperature=temperature,
        fallback=fallback,
        seed=trial_seed(seed),
        refit=refit,
        policy=policy_from(timeout, memory, disk, allow_network, no_sandbox),
    )
    try:
        record = deploy_task(task_dir, flags, config, mlflow_uri)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    if as_json:
        click.echo(record.model_dump_json(indent=2))
    else:
        print_result(record)
    if record.outcome.exit_code:
        raise SystemExit(record.outcome.exit_code)  # errors.py: nothing graded (1), the budget (4)


def deploy_task(
    task_dir: str, flags: dict[str, Any], config: DeployConfig, mlflow_uri: str | None = None
) -> RunRecord:
    """A deploy, checked before its folder is made (the task's data, the model's key or server, the
    sandbox), then run."""
    from dsagent_cbr.agent.rundir import new_run_dir, save_config
    from dsagent_cbr.bank import open_bank
    from dsagent_cbr.llm.models import check_reachable, settings_model
    from dsagent_cbr.sandbox.bubblewrap import require_sandbox
    from dsagent_cbr.tasks.finding import find_task
    from dsagent_cbr.tasks.loader import load_task

    settings = load_settings(**flags)
    task = load_task(find_task(task_dir, settings.tasks_dir), require_data=True)
    # a missing key or server stops here, before a run folder
    check_reachable(settings_model(settings))
    require_sandbox(config.policy.isolate)
    bank = open_bank(settings)
    run_dir = new_run_dir(settings.runs_dir, task.name, settings.home)
    save_config(
        run_dir,
        {
            "task_dir": str(task.root),
            "deploy": {**asdict(config), "policy": config.policy.describe()},
            "settings": {"model": settings.model, "store": settings.store},
        },
    )
    return _run_deploy(task, config, run_dir, settings, bank, mlflow_uri)


def _run_deploy(
    task: Task,
    config: DeployConfig,
    run_dir: Path,
    settings: Settings,
    bank: CaseBank,
    mlflow_uri: str | None,
) -> RunRecord:
    """The deploy with its bank, model, report and tracking; a Ctrl-C says what it left, and goes
    up."""
    from dsagent_cbr.agent.context import reference_valid
    from dsagent_cbr.agent.deploy import deploy as run_deploy
    from dsagent_cbr.agent.progress import LiveProgress
    from dsagent_cbr.llm import open_llm
    from dsagent_cbr.report.observer import ReportWriter
    from dsagent_cbr.search.drafts import text_table_drafts
    from dsagent_cbr.tracking import live_tracking

    reference = reference_valid(task, settings.casebank_dir, settings.tasks_dir)
    # the report first: at the run's end, MLflow's observer logs the report it drew
    observers = (ReportWriter(run_dir), *live_tracking(run_dir, mlflow_uri, task.name))
    try:
        # progress: the starter, the model's call, the script
        with LiveProgress(f"deploying {task.name}") as progress, contextlib.ExitStack() as stack:
            model = (
                None
                if settings.model == "none"
                else stack.enter_context(open_llm(settings, run_dir=run_dir, seed=config.seed))
            )
            return run_deploy(
                task,
                config,
                run_dir,
                bank,
                model,
                settings.tasks_dir,
                progress=progress,
                adapt_first=text_table_drafts(task),
                reference=reference,
                observers=observers,
            )
    except KeyboardInterrupt:
        click.echo(
            f"Interrupted: what the run did is in {run_dir}. A deploy is one step: run it again to "
            "redo it.",
            err=True,
        )
        raise


def print_result(record: RunRecord) -> None:
    from dsagent_cbr.agent.estimate import estimate_line

    facts = record.deploy
    assert facts is not None
    near = facts.retrieved[0] if facts.retrieved else None
    click.echo(f"task:          {record.task} ({record.metric}, {record.direction})")
    click.echo(f"model:         {record.model} ({facts.strategy}, seed {record.seed})")
    if near:
        sim = f"{near['similarity']:.3f}" if isinstance(near["similarity"], float) else "random"
        click.echo(f"example:       {near['task']} ({near['source']}, similarity {sim})")
    if not record.outcome.ours:
        one_pass = (
            "n/a (no LLM)"
            if facts.one_pass is None
            else ("yes" if facts.one_pass else f"no — {facts.llm_error}")
        )
        click.echo(f"one-pass:      {one_pass}")
    else:
        click.echo(f"stopped:       {record.stopped} (not counted as the model's)")
    click.echo(
        f"final:         {'graded' if record.solved else 'failed'} (solved by {facts.solved_by})"
    )
    click.echo(
        f"selection:     {say_score(record.best_selection) if record.selection_rows else 'none'}"
    )
    sure = estimate_line(record.estimate, record.selection_rows)
    if sure:
        click.echo(f"how sure:      {sure}")
    click.echo(f"validation:    {say_score(record.best_valid)} (printed by the script)")
    click.echo(
        f"test:          {say_score(record.best_test) if record.test_answers else 'no test answers'}"
    )
    echo_results(record, 15)
