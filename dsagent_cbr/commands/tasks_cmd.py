"""`cbr tasks list|validate|show|prepare` and `cbr run`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from dsagent_cbr.config import load_settings
from dsagent_cbr.errors import CbrError
from dsagent_cbr.tasks.loader import TaskError, discover_tasks, load_task, resolve_task_path, validate_task

tasks_dir_option = click.option("--tasks-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                                help="Folder holding the task folders (default: the project's tasks/).")


def _tasks_dir(tasks_dir: Path | None) -> Path:
    return load_settings(tasks_dir=tasks_dir).tasks_dir


@click.group()
def tasks() -> None:
    """List, validate, show and prepare task folders."""


@tasks.command("list")
@tasks_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_tasks(tasks_dir: Path | None, as_json: bool) -> None:
    """List the tasks with their stage, modality and metric."""
    from rich.console import Console
    from rich.table import Table

    rows, broken = [], []
    for path in discover_tasks(_tasks_dir(tasks_dir)):
        try:
            rows.append(load_task(path).summary())
        except TaskError:
            broken.append(path.name)
    if as_json:
        click.echo(json.dumps({"tasks": rows, "invalid": broken}, indent=2))
        return
    table = Table("task", "stage", "modality", "type", "metric", "prepared", "paired with")
    for r in rows:
        table.add_row(str(r["name"]), str(r["stage"]), str(r["modality"]), str(r["task_type"]),
                      f"{r['metric']} ({'↑' if r['direction'] == 'maximize' else '↓'})",
                      "yes" if r["prepared"] else "no", ", ".join(r["paired_with"]))  # type: ignore[arg-type]
    Console().print(table)
    if broken:
        click.echo(f"{len(broken)} invalid task folder(s): {', '.join(broken)} (see `cbr tasks validate`)")


@tasks.command("validate")
@click.argument("paths", nargs=-1)
@tasks_dir_option
@click.option("--no-data", is_flag=True, help="Do not require the data to be prepared.")
def validate(paths: tuple[str, ...], tasks_dir: Path | None, no_data: bool) -> None:
    """Check task folders; print one line per problem and exit 2 if there is any."""
    root = _tasks_dir(tasks_dir)
    folders = [resolve_task_path(p, root) for p in paths] if paths else discover_tasks(root)
    if not folders:
        raise CbrError(f"No task folders found in {root}.")
    problems = []
    for folder in folders:
        problems += validate_task(folder, require_data=not no_data)
    if problems:
        raise CbrError(f"{len(problems)} problem(s) in {len(folders)} task folder(s).", details=problems)
    click.echo(f"{len(folders)} task folder(s) valid.")


@tasks.command("show")
@click.argument("task")
@tasks_dir_option
def show(task: str, tasks_dir: Path | None) -> None:
    """Show one task: its settings and description."""
    t = load_task(resolve_task_path(task, _tasks_dir(tasks_dir)))
    for key, value in t.summary().items():
        click.echo(f"{key:>12}: {value}")
    click.echo(f"{'public':>12}: {', '.join(t.public_files)}")
    click.echo("")
    click.echo(t.description)


@tasks.command("prepare")
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Prepare every task.")
@click.option("--force", is_flag=True, help="Rebuild data that already exists.")
@tasks_dir_option
def prepare(names: tuple[str, ...], all_: bool, force: bool, tasks_dir: Path | None) -> None:
    """Build task data offline from installed packages (idempotent)."""
    from dsagent_cbr.tasks.prepare import prepare_task

    root = _tasks_dir(tasks_dir)
    if not names and not all_:
        raise CbrError("Name the tasks to prepare, or pass --all.")
    folders = discover_tasks(root) if all_ else [resolve_task_path(n, root) for n in names]
    failures = []
    for i, folder in enumerate(folders, 1):
        start = time.monotonic()
        try:
            outcome = prepare_task(load_task(folder), force=force)
        except CbrError as exc:
            failures.append(f"{folder.name}: {exc}")
            outcome = "FAILED"
        click.echo(f"[{i}/{len(folders)}] {folder.name}: {outcome} ({time.monotonic() - start:.1f}s)")
    if failures:
        raise CbrError(f"{len(failures)} task(s) could not be prepared.", details=failures)


@tasks.command("export")
@click.argument("task")
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--layout", type=click.Choice(["dsagent"]), default="dsagent", show_default=True,
              help="Folder layout to write: DS-Agent/MLAgentBench's env/ and scripts/.")
@tasks_dir_option
def export(task: str, out: Path, layout: str, tasks_dir: Path | None) -> None:
    """Write TASK (prepared) at OUT in another benchmark's layout, test labels kept for its submission.py."""
    from dsagent_cbr.tasks.export import export_dsagent

    folder = export_dsagent(load_task(resolve_task_path(task, _tasks_dir(tasks_dir)), require_data=True), out)
    click.echo(f"{folder}: env/ (data, train.py, submission.py) and scripts/research_problem.txt ({layout} layout)")


@click.command("run")
@click.argument("task_dir")
@click.argument("script", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Wall-time limit in seconds.")
@click.option("--memory", type=float, default=8192.0, show_default=True, help="Memory limit in MB.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Run folder (default: runs/<task>/run-<time>/).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def run(task_dir: str, script: Path, timeout: float, memory: float, out: Path | None, as_json: bool) -> None:
    """Run SCRIPT on the task in a sandbox, print its validation and test metric, save result.json."""
    from dsagent_cbr.runner.run import run_script

    settings = load_settings()
    task = load_task(resolve_task_path(task_dir, settings.tasks_dir), require_data=True)
    run_dir = out or settings.runs_dir / task.name / time.strftime("run-%Y%m%d-%H%M%S")
    if (run_dir / "workspace").exists():
        raise CbrError(f"{run_dir} already holds a run; choose another --out.")
    result = run_script(task, script, run_dir=run_dir, timeout=timeout, memory_mb=memory)
    if as_json:
        click.echo(result.to_json())
    else:
        arrow = "higher is better" if task.direction == "maximize" else "lower is better"
        click.echo(f"task:       {task.name} ({task.metric_name}, {arrow})")
        click.echo(f"status:     {result.status}" + (f" — {result.error}" if result.error else ""))
        click.echo(f"validation: {result.valid_metric}")
        click.echo(f"test:       {result.test_metric}")
        click.echo(f"time:       {result.wall_time:.1f}s, peak memory {result.peak_memory_mb:.0f} MB")
        click.echo(f"result:     {run_dir / 'result.json'}")
    if not result.ok:
        raise SystemExit(1)
