"""dsagent_cbr.develop and dsagent_cbr.deploy: `cbr develop` and `cbr deploy` as calls. Each takes
a task folder, or a DataFrame (or CSV file) of labelled rows that becomes a task as `cbr tasks new`
makes one, runs the command's own code, says what it does as the command does, and returns the
Run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsagent_cbr.api.run import Run

if TYPE_CHECKING:
    from dsagent_cbr.config import Settings


def develop(
    train: Any,
    target: str | list[str] | None = None,
    test: Any = None,
    *,
    budget: str | float = "1m",
    model: str = "none",
    parallel: int = 1,
    seed: int | None = None,
    refit: bool = True,
    retain: bool = True,
    holdout: float | None = None,
    metric: str | None = None,
    id_column: str | None = None,
    name: str = "table",
    tasks_dir: str | Path | None = None,
    runs_dir: str | Path | None = None,
    store: str | None = None,
) -> Run:
    """Search solutions within `budget` (seconds, or "90s", "15m") and write the submission: what
    `cbr develop TASK --budget B` does. `train`: a task folder, or labelled rows (a DataFrame or a
    CSV file) with `target` and the rows to predict, `test` (none: a `holdout` share of train, 0.2,
    labelled, so the run gets a test score)."""
    from dsagent_cbr.agent.develop import DevelopConfig
    from dsagent_cbr.commands.develop_cmd import NO_CAP, print_summary, run_develop, start_run
    from dsagent_cbr.commands.options import budget_seconds, trial_seed
    from dsagent_cbr.saying import doing

    started = time.monotonic()  # the budget is this call's wall clock
    flags = {"model": model, "runs_dir": runs_dir, "store": store}
    table = {"holdout": holdout, "metric": metric, "id_column": id_column}
    with doing("running dsagent_cbr.develop", announce=False):
        task_dir = _task(train, target, test, flags, table, name, tasks_dir)
        config = DevelopConfig(
            iterations=NO_CAP,
            budget=budget_seconds(str(budget)),
            parallel=parallel,
            seed=trial_seed(seed),
            refit=refit,
            retain=retain,
        )
        task, settings, run_dir = start_run(task_dir, flags, config)
        record = run_develop(task, config, run_dir, settings, started)
        print_summary(record, settings.chroma_url or str(settings.bank_path), config.budget)
    return Run(run_dir)


def deploy(
    train: Any,
    target: str | list[str] | None = None,
    test: Any = None,
    *,
    model: str = "none",
    seed: int | None = None,
    refit: bool = True,
    name: str = "table",
    tasks_dir: str | Path | None = None,
    runs_dir: str | Path | None = None,
    store: str | None = None,
    **table: Any,
) -> Run:
    """Adapt the nearest past solution to the task and run it once: what `cbr deploy TASK` does.
    `train`, `target`, `test` and `table` (holdout, metric, id_column) as for develop."""
    from dsagent_cbr.agent.deploy import DeployConfig
    from dsagent_cbr.commands.deploy_cmd import deploy_task, print_result
    from dsagent_cbr.commands.options import trial_seed
    from dsagent_cbr.saying import doing

    flags = {"model": model, "runs_dir": runs_dir, "store": store}
    with doing("running dsagent_cbr.deploy", announce=False):
        task_dir = _task(train, target, test, flags, table, name, tasks_dir)
        record = deploy_task(task_dir, flags, DeployConfig(seed=trial_seed(seed), refit=refit))
        print_result(record)
    return Run(record.run_dir)


def _task(
    train: Any,
    target: str | list[str] | None,
    test: Any,
    flags: dict[str, Any],
    table: dict[str, Any],
    name: str,
    tasks_dir: str | Path | None,
) -> str:
    """The task folder of a call: `train` itself, or one made of it under `tasks_dir` (by default
    the runs folder's tasks/); `table`: holdout, metric, id_column."""
    from dsagent_cbr.api.tables import task_folder

    where = Path(tasks_dir) if tasks_dir is not None else _settings(flags).runs_dir / "tasks"
    return task_folder(train, target, test, table, where, name)


def _settings(flags: dict[str, Any]) -> Settings:
    from dsagent_cbr.config import load_settings

    return load_settings(**flags)
