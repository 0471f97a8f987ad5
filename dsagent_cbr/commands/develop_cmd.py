"""`cbr develop TASK_DIR --model M` and `cbr develop --resume RUN_DIR`."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dsagent_cbr.commands.options import (
    bank_options,
    budget_seconds,
    interrupt_on_sigterm,
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
from dsagent_cbr.commands.printing import echo_results
from dsagent_cbr.config import load_settings
from dsagent_cbr.errors import CbrError

if TYPE_CHECKING:  # the agent's imports stay lazy: `cbr --help` is instant
    from dsagent_cbr.agent.develop import DevelopConfig
    from dsagent_cbr.agent.record import RunRecord
    from dsagent_cbr.config import Settings
    from dsagent_cbr.tasks.model import Task


@click.command()
@click.argument("task_dir", required=False)
@model_option
@click.option("--iterations", "-T", type=int, default=None,
              help="Iterations of the loop (5), or with --budget a cap on the search's nodes (none).")
@click.option("--budget", default=None, metavar="DURATION",
              help="Wall-clock budget, as 15m, 90s or 1h: the search grows nodes until it is spent.")
@click.option("--parallel", type=click.IntRange(min=1), default=1, show_default=True,
              help="The search's nodes at once, each with its share of the cores (on Ray).")
@click.option("--address", default=None, help="Run the search's nodes on this Ray cluster.")
@click.option("--in-turn", is_flag=True,
              help="With --parallel 1, a model's node waits its turn instead of being written beside the others: "
                   "a seed then grows the same tree however fast the model answers.")
@click.option("-k", "--k", "k", type=int, default=5, show_default=True, help="Insight cases retrieved.")
@click.option("--n-debug", type=int, default=5, show_default=True, help="Debug attempts per iteration.")
@click.option("--temperature", type=float, default=0.5, show_default=True)
@click.option("--no-rerank", is_flag=True, help="Ablation: use the retrieval order, no LLM re-ranking.")
@click.option("--no-cbr", is_flag=True, help="Ablation: plan without retrieved cases.")
@sandbox_options
@seed_option
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Continue an interrupted run after its last completed step.")
@bank_options
@click.option("--runs-dir", type=click.Path(path_type=Path), default=None, help="Where run folders go.")
@click.option("--max-cost", type=float, default=None, help="Stop cleanly when this many dollars are spent.")
@click.option("--max-tokens", type=int, default=None, help="Stop cleanly when this many tokens are used.")
@click.option("--no-cache", is_flag=True, help="Do not answer from the response cache.")
@refit_option
@click.option("--no-retain", is_flag=True, help="Add nothing to the bank: the run's solutions are not retained.")
@mlflow_option
@json_option
def develop(task_dir: str | None, model: str | None, iterations: int | None, budget: str | None, parallel: int,
            address: str | None, in_turn: bool, k: int,
            n_debug: int, temperature: float, no_rerank: bool, no_cbr: bool, timeout: float, memory: float, disk: float, allow_network: bool,
            no_sandbox: bool, seed: int | None, resume_dir: Path | None, store: str | None, bank_dir: Path | None,
            chroma_url: str | None, runs_dir: Path | None, max_cost: float | None, max_tokens: int | None,
            no_cache: bool, refit: bool, no_retain: bool, mlflow_uri: str | None, as_json: bool) -> None:
    """Develop a solution for TASK_DIR with the CBR loop (retrieve, rerank, plan, program, debug, log, retain)."""
    from dsagent_cbr.agent.develop import DevelopConfig
    from dsagent_cbr.agent.rundir import load_config, new_run_dir, save_config
    from dsagent_cbr.llm.models import settings_model
    from dsagent_cbr.sandbox.bubblewrap import require_sandbox
    from dsagent_cbr.tasks.finding import find_task
    from dsagent_cbr.tasks.loader import load_task

    flags = {"model": model, "store": store, "bank_dir": bank_dir, "chroma_url": chroma_url, "runs_dir": runs_dir,
             "max_cost": max_cost, "max_tokens": max_tokens, "use_cache": False if no_cache else None}
    if resume_dir is not None:
        saved = load_config(resume_dir)
        settings = load_settings(**{**saved["settings"], **{k: v for k, v in flags.items() if v is not None}})
        task = load_task(saved["task_dir"], require_data=True)
        config = resumed_config(DevelopConfig.from_dict(saved["develop"]), allow_network, no_sandbox)
        run_dir = resume_dir
        save_config(run_dir, {**saved, "develop": asdict(config)})  # config.json says what this leg used
    else:
        if task_dir is None:
            raise CbrError("Give a task folder, or --resume RUN_DIR.")
        settings = load_settings(**flags)
        task = load_task(find_task(task_dir, settings.tasks_dir), require_data=True)
        settings_model(settings)  # a missing key or server stops here, before a run folder exists
        policy = policy_from(timeout, memory, disk, allow_network, no_sandbox)
        seconds = None if budget is None else budget_seconds(budget)
        if (parallel > 1 or address) and budget is None and settings.model != "none":
            raise CbrError("--parallel and --address are the search's: give --budget (or --model none).")
        config = DevelopConfig(iterations=iterations or (NO_CAP if budget else 5), budget=seconds, k=k,
                               parallel=parallel, address=address, in_turn=in_turn,
                               n_debug=n_debug, temperature=temperature, rerank=not no_rerank, cbr=not no_cbr,
                               seed=trial_seed(seed), refit=refit, retain=not no_retain, policy=asdict(policy))
        run_dir = new_run_dir(settings.runs_dir, task.name)
        save_config(run_dir, {"task_dir": str(task.root), "develop": asdict(config),
                              "settings": {"model": settings.model, "store": settings.store,
                                           "bank_dir": str(settings.bank_path), "chroma_url": settings.chroma_url,
                                           "runs_dir": str(settings.runs_dir)}})
    require_sandbox(config.sandbox.isolate)
    interrupt_on_sigterm()
    try:
        record = run_develop(task, config, run_dir, settings)
    finally:
        if (run_dir / "summary.json").is_file():  # interrupted runs are tracked too, as killed
            track(run_dir, mlflow_uri)
    if as_json:
        click.echo(record.model_dump_json(indent=2))
    else:
        _print_summary(record, settings.chroma_url or str(settings.bank_path))
    if record.outcome.exit_code:
        raise SystemExit(record.outcome.exit_code)  # errors.py: no graded solution (1), the budget (4)


NO_CAP = 10_000  # -T with --budget: the budget ends the search


def resumed_config(config: DevelopConfig, allow_network: bool, no_sandbox: bool) -> DevelopConfig:
    """The saved config with the sandbox's weakenings taken from this command line only: a run folder
    is just files, so its config.json must not be able to turn isolation off or the network on."""
    config.policy = {**config.policy, "isolate": not no_sandbox, "allow_network": allow_network}
    return config


def _print_summary(record: RunRecord, bank: str) -> None:
    click.echo(f"run:             {record.run_dir}")
    click.echo(f"stopped:         {record.stopped}")
    if record.best_iteration is None:
        click.echo("best:            no iteration produced a graded solution")
    else:
        test = record.best_test if record.test_answers else "no test answers"
        click.echo(f"best:            {record.selected_by} {record.metric} {record.best_score} (iteration "
                   f"{record.best_iteration}; the script printed validation {record.best_valid})")
        click.echo(f"its test score:  {test}")
    echo_results(record, 17, bank)


def run_develop(task: Task, config: DevelopConfig, run_dir: Path, settings: Settings) -> RunRecord:
    from dsagent_cbr.agent.context import reference_valid
    from dsagent_cbr.agent.develop import develop_with_model
    from dsagent_cbr.agent.progress import LiveProgress
    from dsagent_cbr.agent.search import develop_search
    from dsagent_cbr.bank import open_bank

    bank = open_bank(settings)
    reference = reference_valid(task, settings.casebank_dir, settings.tasks_dir)
    with LiveProgress(f"developing {task.name}", total=None if config.budget else config.iterations) as progress:
        if settings.model == "none":
            return develop_search(task, config, run_dir, bank, progress=progress, reference=reference)
        from dsagent_cbr.llm import open_llm

        with open_llm(settings, run_dir=run_dir, seed=config.seed) as client:
            if config.budget is not None:  # a budget: the search, with the model's operators among its own
                return develop_search(task, config, run_dir, bank, progress=progress, reference=reference,
                                      model=client)
            return develop_with_model(task, config, run_dir, bank, client, progress=progress, reference=reference)
