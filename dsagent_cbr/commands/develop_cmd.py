"""`cbr develop TASK_DIR --model M` and `cbr develop --resume RUN_DIR`."""

from __future__ import annotations

import math
import shlex
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dsagent_cbr.clock import process_start
from dsagent_cbr.commands.options import (
    bank_options,
    budget_seconds,
    interrupt_once,
    json_option,
    mlflow_option,
    model_option,
    no_cache_option,
    policy_change,
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
from dsagent_cbr.errors import CbrError

if TYPE_CHECKING:  # the agent's imports stay lazy: `cbr --help` is instant
    from dsagent_cbr.agent.develop import DevelopConfig
    from dsagent_cbr.agent.record import RunRecord
    from dsagent_cbr.config import Settings
    from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
    from dsagent_cbr.tasks.model import Task


@click.command()
@click.argument("task_dir", required=False)
@model_option
@click.option(
    "--iterations",
    "-T",
    type=int,
    default=None,
    help="Iterations of the loop (5), or with --budget a cap on the search's nodes (none).",
)
@click.option(
    "--budget",
    default=None,
    metavar="DURATION",
    help="Wall-clock budget, as 15m, 90s or 1h: the search grows nodes until it is spent.",
)
@click.option(
    "--parallel",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="The search's nodes at once, each with its share of the cores (on Ray).",
)
@click.option("--address", default=None, help="Run the search's nodes on this Ray cluster.")
@click.option(
    "--in-turn",
    is_flag=True,
    help="A model's node takes a plain node's place instead of being written beside them: a seed then grows "
    "the same tree however fast the model answers.",
)
@click.option(
    "-k", "--k", "k", type=int, default=5, show_default=True, help="Insight cases retrieved."
)
@click.option(
    "--n-debug", type=int, default=5, show_default=True, help="Debug attempts per iteration."
)
@click.option("--temperature", type=float, default=0.5, show_default=True)
@click.option(
    "--no-rerank", is_flag=True, help="Ablation: use the retrieval order, no LLM re-ranking."
)
@click.option("--no-cbr", is_flag=True, help="Ablation: plan without retrieved cases.")
@sandbox_options
@seed_option
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Continue an interrupted run after its last completed step.",
)
@bank_options
@runs_dir_option
@click.option(
    "--max-cost", type=float, default=None, help="Stop cleanly when this many dollars are spent."
)
@click.option(
    "--max-tokens", type=int, default=None, help="Stop cleanly when this many tokens are used."
)
@no_cache_option
@refit_option
@click.option(
    "--no-retain",
    is_flag=True,
    help="Add nothing to the bank: the run's solutions are not retained.",
)
@mlflow_option
@json_option
def develop(
    task_dir: str | None,
    model: str | None,
    iterations: int | None,
    budget: str | None,
    parallel: int,
    address: str | None,
    in_turn: bool,
    k: int,
    n_debug: int,
    temperature: float,
    no_rerank: bool,
    no_cbr: bool,
    timeout: float,
    memory: float,
    disk: float,
    allow_network: bool,
    no_sandbox: bool,
    seed: int | None,
    resume_dir: Path | None,
    store: str | None,
    bank_dir: Path | None,
    chroma_url: str | None,
    runs_dir: Path | None,
    max_cost: float | None,
    max_tokens: int | None,
    no_cache: bool,
    refit: bool,
    no_retain: bool,
    mlflow_uri: str | None,
    as_json: bool,
) -> None:
    """Develop a solution for TASK_DIR with the CBR loop (retrieve, rerank, plan, program, debug, log, retain)."""
    started = process_start()  # the budget is the command's wall clock, from the process's start
    flags = settings_flags(model, store, bank_dir, chroma_url, runs_dir, max_cost, no_cache)
    flags["max_tokens"] = max_tokens
    policy = policy_from(timeout, memory, disk, allow_network, no_sandbox)
    if resume_dir is not None:
        task, config, settings = resume_run(resume_dir, flags, policy, address)
        run_dir = resume_dir
    else:
        config = new_config(
            policy,
            iterations=iterations,
            budget=budget,
            k=k,
            parallel=parallel,
            address=address,
            in_turn=in_turn,
            n_debug=n_debug,
            temperature=temperature,
            rerank=not no_rerank,
            cbr=not no_cbr,
            seed=seed,
            refit=refit,
            retain=not no_retain,
        )
        task, settings, run_dir = start_run(task_dir, flags, config)
    develop_and_say(task, config, run_dir, settings, started, mlflow_uri, as_json)


def new_config(
    policy: SandboxPolicy,
    *,
    iterations: int | None,
    budget: str | None,
    seed: int | None,
    **fields: Any,
) -> DevelopConfig:
    """A new run's config from its command line: -T's default is 5 iterations, or no cap under a
    budget; no --seed is a fresh one. `fields`: DevelopConfig's others, as the options give them."""
    from dsagent_cbr.agent.develop import DevelopConfig

    return DevelopConfig(
        iterations=iterations or (NO_CAP if budget else 5),
        budget=None if budget is None else budget_seconds(budget),
        seed=trial_seed(seed),
        policy=asdict(policy),
        **fields,
    )


def resume_run(
    run_dir: Path, flags: dict[str, Any], policy: SandboxPolicy, address: str | None
) -> tuple[Task, DevelopConfig, Settings]:
    """An interrupted run's task, config and settings (_resume), with its sandbox checked."""
    from dsagent_cbr.sandbox.bubblewrap import require_sandbox

    task, config, settings = _resume(run_dir, flags, policy, address)
    require_sandbox(config.sandbox.isolate)
    return task, config, settings


def develop_and_say(
    task: Task,
    config: DevelopConfig,
    run_dir: Path,
    settings: Settings,
    started: float,
    mlflow_uri: str | None,
    as_json: bool,
) -> None:
    """The run, then its record said (as JSON with --json); its outcome is the exit code. A first Ctrl-C
    stops the run cleanly, saved, with the command that resumes it."""
    interrupt_once()
    try:
        record = run_develop(task, config, run_dir, settings, started, mlflow_uri)
    except KeyboardInterrupt:
        click.echo(
            f"Interrupted: the run is saved in {run_dir}. Resume it with:\n"
            f"  cbr develop --resume {shlex.quote(str(run_dir))}",
            err=True,
        )
        raise SystemExit(130) from None
    if as_json:
        click.echo(record.model_dump_json(indent=2))
    else:
        print_summary(record, settings.chroma_url or str(settings.bank_path), config.budget)
    if record.outcome.exit_code:
        # errors.py: no graded solution (1), the budget (4)
        raise SystemExit(record.outcome.exit_code)


def start_run(
    task_dir: str | None, flags: dict[str, Any], config: DevelopConfig
) -> tuple[Task, Settings, Path]:
    """A new run's task, settings and folder (with its config.json), all checked before the folder
    is made: a budget the search can honour, the task's data, the model's key or server, the
    sandbox."""
    from dsagent_cbr.sandbox.bubblewrap import require_sandbox
    from dsagent_cbr.search.policy import budget_too_short

    too_short = budget_too_short(config.budget) if config.budget is not None else None
    if too_short:
        raise CbrError(too_short)
    task, settings = _task_and_settings(task_dir, flags)
    if (
        (config.parallel > 1 or config.address)
        and config.budget is None
        and settings.model != "none"
    ):
        raise CbrError(
            "--parallel and --address are the search's: give --budget (or --model none)."
        )
    require_sandbox(config.sandbox.isolate)
    return task, settings, _new_run_dir(task, config, settings)


def _task_and_settings(task_dir: str | None, flags: dict[str, Any]) -> tuple[Task, Settings]:
    """A new run's task and settings, checked before anything is written: the task's data is there,
    and the model's key or server answers."""
    from dsagent_cbr.llm.models import check_reachable, settings_model
    from dsagent_cbr.tasks.finding import find_task
    from dsagent_cbr.tasks.loader import load_task

    if task_dir is None:
        raise CbrError("Give a task folder, or --resume RUN_DIR.")
    settings = load_settings(**flags)
    task = load_task(find_task(task_dir, settings.tasks_dir), require_data=True)
    check_reachable(settings_model(settings))
    return task, settings


def _new_run_dir(task: Task, config: DevelopConfig, settings: Settings) -> Path:
    """The run's folder, with the config.json a resume reads back."""
    from dsagent_cbr.agent.rundir import new_run_dir, save_config

    run_dir = new_run_dir(settings.runs_dir, task.name, settings.home)
    saved = {
        "model": settings.model,
        "store": settings.store,
        "bank_dir": str(settings.bank_path),
        "chroma_url": settings.chroma_url,
        "runs_dir": str(settings.runs_dir),
    }
    save_config(run_dir, {"task_dir": str(task.root), "develop": asdict(config), "settings": saved})
    return run_dir


NO_CAP = 10_000  # -T with --budget: the budget ends the search


def resumed_config(
    config: DevelopConfig, policy: SandboxPolicy, address: str | None = None
) -> DevelopConfig:
    """The saved config with the sandbox's policy taken whole from this command line (or its defaults), and
    the Ray cluster the scripts run on too: a run folder is just files, so its config.json must not be
    able to lift a limit, turn isolation off, the network on, or send the scripts to another machine."""
    config.policy, config.address = asdict(policy), address
    return config


def _resume(
    run_dir: Path, flags: dict[str, Any], policy: SandboxPolicy, address: str | None
) -> tuple[Task, DevelopConfig, Settings]:
    """An interrupted run's task, config and settings, read back from its folder (checked first: one
    sentence, exit 2, when a file is not what cbr wrote), with this command's sandbox. config.json then
    says what this leg uses, and a line on stderr says how that differs from what the run used so far."""
    from dsagent_cbr.agent.journal import RunJournal
    from dsagent_cbr.agent.rundir import load_config, save_config
    from dsagent_cbr.tasks.loader import load_task

    saved = load_config(run_dir)
    # read once here too: a damaged journal is refused before config.json is rewritten
    RunJournal(run_dir).check_results()
    config = resumed_config(saved_develop(saved.develop, run_dir / "config.json"), policy, address)
    if (saved.develop or {}).get("address") not in (None, address):
        click.echo(
            f"resuming {'on --address ' + address if address else 'on this machine'} (the run so far ran "
            "its scripts on a Ray cluster: give --address again to keep it)",
            err=True,
        )
    given = {k: v for k, v in flags.items() if v is not None}
    settings = load_settings(**{**saved.settings.model_dump(), **given})
    task = load_task(saved.task_dir, require_data=True)
    change = policy_change((saved.develop or {}).get("policy"), policy)
    if change:
        click.echo(change, err=True)
    save_config(
        run_dir,
        {
            "task_dir": saved.task_dir,
            "develop": asdict(config),
            "settings": saved.settings.model_dump(),
        },
    )
    return task, config, settings


def saved_develop(develop: dict[str, Any] | None, path: Path) -> DevelopConfig:
    """config.json's develop section, checked field by field against DevelopConfig. Its sandbox policy is
    not read at all: a resume takes every limit from its own command line."""
    from pydantic import TypeAdapter, ValidationError

    from dsagent_cbr.agent.develop import DevelopConfig
    from dsagent_cbr.agent.rundir import shape_error, unreadable_config

    if develop is None:
        raise CbrError(f"{path} is not a develop run's config (it has no develop section).")
    fields = {k: v for k, v in develop.items() if k != "policy"}
    try:
        config = TypeAdapter(DevelopConfig).validate_python(fields)
    except ValidationError as exc:
        raise shape_error(path, exc, "develop") from None
    # the bounds the command line itself keeps (--parallel, --budget), which any config cbr wrote keeps too
    if config.parallel < 1:
        raise unreadable_config(path, "develop.parallel", f"{config.parallel}, not at least 1")
    if config.budget is not None and not (math.isfinite(config.budget) and config.budget > 0):
        raise unreadable_config(
            path, "develop.budget", f"{config.budget} seconds, not more than zero"
        )
    return config


def print_summary(record: RunRecord, bank: str, budget: float | None = None) -> None:
    from dsagent_cbr.agent.estimate import estimate_line
    from dsagent_cbr.clock import say_time_of

    click.echo(f"run:             {record.run_dir}")
    click.echo(f"stopped:         {record.stopped}")
    if record.took is not None:
        click.echo(f"time:            {say_time_of(record.took, budget)}")
    if record.best_iteration is None:
        click.echo("best:            no iteration produced a graded solution")
    else:
        test = say_score(record.best_test) if record.test_answers else "no test answers"
        claim = record.best_valid
        printed = "" if claim is None else f"; the script printed validation {say_score(claim)}"
        chosen = f"{record.selected_by} {record.metric} {say_score(record.best_score)}"
        click.echo(f"best:            {chosen} (iteration {record.best_iteration}{printed})")
        click.echo(f"its test score:  {test}")
        sure = estimate_line(record.estimate, record.selection_rows)
        if sure:
            click.echo(f"how sure:        {sure}")
    given = [f"{k} {v:.5g}" for k, v in record.baselines.items() if v is not None]
    if given:
        click.echo(f"baselines:       {', '.join(given)}")
    echo_results(record, 17, bank)


def starting_line(task: Task, config: DevelopConfig, model: str, run_dir: Path) -> str:
    """What a run is about to do, said first: the starter's run and the first node come in
    silence."""
    from dsagent_cbr.clock import say_duration

    within = (
        f"within {say_duration(config.budget)}"
        if config.budget
        else f"for {config.iterations} iteration(s)"
    )
    by = "no model" if model == "none" else f"the model {model}"
    at_once = f", {config.parallel} nodes at once" if config.parallel > 1 else ""
    return f"developing {task.name} ({task.metric_name}) {within} with {by}{at_once}: {run_dir}"


def run_develop(
    task: Task,
    config: DevelopConfig,
    run_dir: Path,
    settings: Settings,
    started: float | None = None,
    mlflow_uri: str | None = None,
) -> RunRecord:
    from dsagent_cbr.agent.context import reference_valid
    from dsagent_cbr.agent.develop import develop_with_model
    from dsagent_cbr.agent.progress import LiveProgress
    from dsagent_cbr.bank import open_bank
    from dsagent_cbr.bank.embedder import warm_up
    from dsagent_cbr.clock import Clock
    from dsagent_cbr.report.observer import ReportWriter
    from dsagent_cbr.saying import say
    from dsagent_cbr.search.loop import develop_search
    from dsagent_cbr.tracking import live_tracking

    say(starting_line(task, config, settings.model, run_dir))
    # a search may end before it retrieves: the seed files are indexed when it first does
    bank = open_bank(settings, seed_when_searched=True)
    # retrieval and retain embed with it: it loads while the starter and the first drafts run (under
    # load it took 5-20 s, a large share of a short budget)
    warm_up(bank.embedder.model_name)
    reference = reference_valid(task, settings.casebank_dir, settings.tasks_dir)
    # the report first: at the run's end, MLflow's observer logs the report it drew
    observers = (ReportWriter(run_dir), *live_tracking(run_dir, mlflow_uri, task.name))
    seen = {"reference": reference, "observers": observers, "clock": Clock(config.budget, started)}
    with LiveProgress(
        f"developing {task.name}", total=None if config.budget else config.iterations
    ) as progress:
        if settings.model == "none":
            return develop_search(task, config, run_dir, bank, progress=progress, **seen)
        from dsagent_cbr.llm import open_llm

        with open_llm(settings, run_dir=run_dir, seed=config.seed) as client:
            # a budget: the search, with the model's operators among its own
            if config.budget is not None:
                return develop_search(
                    task,
                    config,
                    run_dir,
                    bank,
                    progress=progress,
                    **seen,
                    model=client if worth_asking(client, seen["clock"].left()) else None,
                    tasks_dir=settings.tasks_dir,
                )
            worth_asking(client, None)  # its speed, said
            return develop_with_model(
                task, config, run_dir, bank, client, progress=progress, **seen
            )


def worth_asking(client: Any, left: float | None) -> bool:
    """A local model's speed, measured and said before the user waits (minutes a node on a CPU): is it
    fast enough to write one node in the `left` seconds of the budget? Other models are not measured."""
    from dsagent_cbr.llm.local_speed import search_note

    if client.spec.provider != "local":
        return True
    said, worth = search_note(client.spec.base_url or "", left)
    if said:
        click.echo(said, err=True)
    return worth
