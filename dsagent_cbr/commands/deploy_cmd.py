"""`cbr deploy TASK_DIR --model M`: one-shot adaptation of the nearest past solution."""

from __future__ import annotations

import json
from pathlib import Path

import click

from dsagent_cbr.config import load_settings


@click.command()
@click.argument("task_dir")
@click.option("--model", default=None, help="Model alias or name (gpt-4o, mixtral, local, gguf:PATH, none).")
@click.option("--strategy", type=click.Choice(["cbr", "zero-shot", "one-shot-random"]), default="cbr",
              show_default=True, help="cbr: nearest solution; the paper's baselines otherwise.")
@click.option("--cases", type=int, default=1, show_default=True, help="Example solutions in the prompt.")
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option("--fallback/--no-fallback", default=True, show_default=True,
              help="Let the structural adapter take over when the LLM's script fails.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Time limit per script run (s).")
@click.option("--memory", type=float, default=8192.0, show_default=True, help="Memory limit per script run (MB).")
@click.option("--seed", type=int, default=0, help="Seed for one-shot-random.")
@click.option("--store", type=click.Choice(["chroma", "faiss"]), default=None, help="Vector store backend.")
@click.option("--bank-dir", type=click.Path(path_type=Path), default=None, help="Bank directory.")
@click.option("--chroma-url", default=None, help="Chroma server URL (default: embedded).")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=None, help="Where run folders go.")
@click.option("--max-cost", type=float, default=None, help="Refuse calls beyond this many dollars.")
@click.option("--no-cache", is_flag=True, help="Do not answer from the response cache.")
@click.option("--json", "as_json", is_flag=True, help="Print result.json.")
def deploy(task_dir: str, model: str | None, strategy: str, cases: int, temperature: float, fallback: bool,
           timeout: float, memory: float, seed: int, store: str | None, bank_dir: Path | None,
           chroma_url: str | None, runs_dir: Path | None, max_cost: float | None, no_cache: bool,
           as_json: bool) -> None:
    """Solve TASK_DIR by adapting the most similar past (task, solution) pair in one shot."""
    from dsagent_cbr.agent.deploy import DeployConfig
    from dsagent_cbr.agent.deploy import deploy as run_deploy
    from dsagent_cbr.agent.rundir import new_run_dir
    from dsagent_cbr.bank import open_bank
    from dsagent_cbr.llm.models import settings_model
    from dsagent_cbr.tasks.loader import load_task, resolve_task_path

    settings = load_settings(model=model, store=store, bank_dir=bank_dir, chroma_url=chroma_url,
                             runs_dir=runs_dir, max_cost=max_cost, use_cache=False if no_cache else None)
    task = load_task(resolve_task_path(task_dir, settings.tasks_dir), require_data=True)
    config = DeployConfig(strategy=strategy, cases=cases, temperature=temperature, fallback=fallback,
                          timeout=timeout, memory_mb=memory, seed=seed)
    settings_model(settings)  # a missing key or server stops here, before a run folder exists
    bank = open_bank(settings)
    run_dir = new_run_dir(settings.runs_dir, task.name)
    if settings.model == "none":
        result = run_deploy(task, config, run_dir, bank, None, settings.tasks_dir)
    else:
        from dsagent_cbr.llm import open_llm

        with open_llm(settings, run_dir=run_dir) as client:
            result = run_deploy(task, config, run_dir, bank, client, settings.tasks_dir)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, default=str))
        return
    near = result.retrieved[0] if result.retrieved else None
    click.echo(f"task:       {task.name} ({task.metric_name}, {task.direction})")
    click.echo(f"model:      {result.model} ({result.strategy})")
    if near:
        sim = f"{near['similarity']:.3f}" if near["similarity"] is not None else "random"
        click.echo(f"example:    {near['task']} (similarity {sim})")
    one_pass = "n/a (no LLM)" if result.one_pass is None else ("yes" if result.one_pass else f"no — {result.llm_error}")
    click.echo(f"one-pass:   {one_pass}")
    click.echo(f"final:      {'graded' if result.final_success else 'failed'} (solved by {result.solved_by})")
    click.echo(f"validation: {result.valid_metric}")
    click.echo(f"test:       {result.test_metric}")
    if result.tokens:
        click.echo(f"cost:       ${result.cost_usd:.4f} for {result.tokens} tokens")
    click.echo(f"run:        {run_dir}")
