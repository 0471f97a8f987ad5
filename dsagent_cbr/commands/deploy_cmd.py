"""`cbr deploy TASK_DIR --model M`: one-shot adaptation of the nearest past solution."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from dsagent_cbr.commands.options import (
    bank_options,
    json_option,
    mlflow_option,
    model_option,
    policy_from,
    refit_option,
    sandbox_options,
    seed_option,
    track,
    trial_seed,
)
from dsagent_cbr.config import load_settings
from dsagent_cbr.errors import CbrError


@click.command()
@click.argument("task_dir")
@model_option
@click.option("--strategy", type=click.Choice(["cbr", "zero-shot", "one-shot-random"]), default="cbr",
              show_default=True, help="cbr: nearest solution; the paper's baselines otherwise.")
@click.option("--cases", type=int, default=1, show_default=True, help="Example solutions in the prompt.")
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option("--fallback/--no-fallback", default=True, show_default=True,
              help="Let the structural adapter take over when the LLM's script fails.")
@sandbox_options
@seed_option
@bank_options
@click.option("--runs-dir", type=click.Path(path_type=Path), default=None, help="Where run folders go.")
@click.option("--max-cost", type=float, default=None, help="Refuse calls beyond this many dollars.")
@click.option("--no-cache", is_flag=True, help="Do not answer from the response cache.")
@refit_option
@mlflow_option
@json_option
def deploy(task_dir: str, model: str | None, strategy: str, cases: int, temperature: float, fallback: bool,
           timeout: float, memory: float, disk: float, allow_network: bool, no_sandbox: bool, seed: int | None,
           store: str | None, bank_dir: Path | None, chroma_url: str | None, runs_dir: Path | None,
           max_cost: float | None, no_cache: bool, refit: bool, mlflow_uri: str | None, as_json: bool) -> None:
    """Solve TASK_DIR by adapting the most similar past (task, solution) pair in one shot."""
    from dsagent_cbr.agent.deploy import DeployConfig
    from dsagent_cbr.agent.deploy import deploy as run_deploy
    from dsagent_cbr.agent.rundir import new_run_dir, save_config
    from dsagent_cbr.bank import open_bank
    from dsagent_cbr.llm.models import settings_model
    from dsagent_cbr.runner.sandbox import require_sandbox
    from dsagent_cbr.tasks.loader import load_task, resolve_task_path

    settings = load_settings(model=model, store=store, bank_dir=bank_dir, chroma_url=chroma_url,
                             runs_dir=runs_dir, max_cost=max_cost, use_cache=False if no_cache else None)
    task = load_task(resolve_task_path(task_dir, settings.tasks_dir), require_data=True)
    policy = policy_from(timeout, memory, disk, allow_network, no_sandbox)
    config = DeployConfig(strategy=strategy, cases=cases, temperature=temperature, fallback=fallback,
                          seed=trial_seed(seed), refit=refit, policy=policy)
    settings_model(settings)  # a missing key or server stops here, before a run folder exists
    require_sandbox(policy.isolate)
    bank = open_bank(settings)
    run_dir = new_run_dir(settings.runs_dir, task.name)
    save_config(run_dir, {"task_dir": str(task.root), "deploy": {**asdict(config), "policy": policy.describe()},
                          "settings": {"model": settings.model, "store": settings.store}})
    if settings.model == "none":
        result = run_deploy(task, config, run_dir, bank, None, settings.tasks_dir)
    else:
        from dsagent_cbr.llm import open_llm

        with open_llm(settings, run_dir=run_dir, seed=config.seed) as client:
            result = run_deploy(task, config, run_dir, bank, client, settings.tasks_dir)
    track(run_dir, mlflow_uri)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        _print_result(result, task)
    if result.outcome != "agent":
        raise CbrError(f"The model was never reached ({result.llm_error}); this run is not counted as the "
                       f"model's. Run folder: {run_dir}")
    if not result.final_success:
        raise SystemExit(1)


def _print_result(result: Any, task: Any) -> None:
    near = result.retrieved[0] if result.retrieved else None
    click.echo(f"task:          {task.name} ({task.metric_name}, {task.direction})")
    click.echo(f"model:         {result.model} ({result.strategy}, seed {result.seed})")
    if near:
        sim = f"{near['similarity']:.3f}" if near["similarity"] is not None else "random"
        click.echo(f"example:       {near['task']} ({near['source']}, similarity {sim})")
    if result.outcome == "agent":
        one_pass = "n/a (no LLM)" if result.one_pass is None else ("yes" if result.one_pass else f"no — {result.llm_error}")
        click.echo(f"one-pass:      {one_pass}")
    click.echo(f"final:         {'graded' if result.final_success else 'failed'} (solved by {result.solved_by})")
    click.echo(f"validation:    {result.valid_metric}")
    click.echo(f"test:          {result.test_metric if result.test_answers else 'no test answers'}")
    if result.tokens:
        click.echo(f"cost:          ${result.cost_usd:.4f} for {result.tokens} tokens")
    click.echo(f"run:           {result.run_dir}")
    if result.best_solution:
        click.echo(f"best solution: {result.best_solution}")
    if result.submission:
        click.echo(f"submission:    {result.submission}")
