"""`cbr tasks list|validate|show|prepare` and `cbr run`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dsagent_cbr.commands.options import json_option, policy_from, sandbox_options
from dsagent_cbr.config import load_settings
from dsagent_cbr.errors import CbrError
from dsagent_cbr.tasks.finding import RECIPE, all_tasks, find_task
from dsagent_cbr.tasks.loader import (
    TaskError,
    detect_layout,
    discover_tasks,
    load_task,
    validate_task,
)
from dsagent_cbr.tasks.recipes import EXAMPLES

if TYPE_CHECKING:
    from dsagent_cbr.tasks.infer import NewTaskReport

tasks_dir_option = click.option(
    "--tasks-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder of recipe task folders (default: the project's tasks/); your own "
    "tasks in ./tasks/ and . are found first.",
)


def _tasks_dir(tasks_dir: Path | None) -> Path:
    return load_settings(tasks_dir=tasks_dir).tasks_dir


@click.group()
def tasks() -> None:
    """List, validate, show and prepare task folders."""


@tasks.command("list")
@tasks_dir_option
@json_option
def list_tasks(tasks_dir: Path | None, as_json: bool) -> None:
    """List the tasks: yours (./tasks/ and .) first, then the recipes, with stage, modality and metric."""
    import sys

    from rich.console import Console
    from rich.table import Table

    rows, broken = [], []
    for found in all_tasks(_tasks_dir(tasks_dir)):
        try:
            rows.append({**load_task(found.path).summary(), "where": found.origin})
        except TaskError:
            broken.append(str(found.path))
    if as_json:
        click.echo(json.dumps({"tasks": rows, "invalid": broken}, indent=2))
        return
    table = Table("task", "where", "stage", "modality", "type", "metric", "prepared", "paired with")
    table.columns[0].no_wrap = True  # a name is never cut, on a terminal or off it
    for r in rows:
        table.add_row(
            str(r["name"]),
            str(r["where"]),
            str(r["stage"]),
            str(r["modality"]),
            str(r["task_type"]),
            f"{r['metric']} ({'↑' if r['direction'] == 'maximize' else '↓'})",
            "yes" if r["prepared"] else "no",
            ", ".join(r["paired_with"]),
        )  # type: ignore[arg-type]
    Console(width=None if sys.stdout.isatty() else 200).print(table)
    if broken:
        click.echo(
            f"{len(broken)} invalid task folder(s): {', '.join(broken)} (see `cbr tasks validate`)"
        )


@tasks.command("validate")
@click.argument("paths", nargs=-1)
@tasks_dir_option
@click.option("--no-data", is_flag=True, help="Do not require the data to be prepared.")
def validate(paths: tuple[str, ...], tasks_dir: Path | None, no_data: bool) -> None:
    """Check task folders (names, paths, or folders of task folders; by default every task found);
    print one line per problem and exit 2 if there is any. A recipe need not be prepared: `cbr tasks
    prepare` builds its data when it is wanted."""
    root = _tasks_dir(tasks_dir)
    found = (
        [(f.path, f.origin == RECIPE) for f in all_tasks(root)]
        if not paths
        else [(folder, False) for p in paths for folder in _named_folders(p, root)]
    )
    if not found:
        raise CbrError(f"No task folders found (looked in ./tasks, . and {root}).")
    problems = []
    for folder, recipe in found:
        problems += validate_task(folder, require_data=not (no_data or recipe))
    if problems:
        raise CbrError(
            f"{len(problems)} problem(s) in {len(found)} task folder(s).", details=problems
        )
    click.echo(f"{len(found)} task folder(s) valid.")


def _named_folders(given: str, recipes: Path) -> list[Path]:
    """A command line's task: its folder, or every task folder inside a folder of them."""
    path = Path(given)
    if path.is_dir() and detect_layout(path) is None and discover_tasks(path):
        return discover_tasks(path)
    return [find_task(given, recipes)]


@tasks.command("show")
@click.argument("task")
@tasks_dir_option
@json_option
def show(task: str, tasks_dir: Path | None, as_json: bool) -> None:
    """Show one task: its settings and description."""
    t = load_task(find_task(task, _tasks_dir(tasks_dir)))
    if as_json:
        click.echo(
            json.dumps(
                {**t.summary(), "public": list(t.public_files), "description": t.description},
                indent=2,
            )
        )
        return
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
    folders = [f.path for f in all_tasks(root)] if all_ else [find_task(n, root) for n in names]
    failures = []
    for i, folder in enumerate(folders, 1):
        start = time.monotonic()
        try:
            outcome = prepare_task(load_task(folder), force=force)
        except CbrError as exc:
            failures.append(f"{folder.name}: {exc}")
            outcome = "FAILED"
        click.echo(
            f"[{i}/{len(folders)}] {folder.name}: {outcome} ({time.monotonic() - start:.1f}s)"
        )
    if failures:
        raise CbrError(f"{len(failures)} task(s) could not be prepared.", details=failures)


@tasks.command("export")
@click.argument("task")
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--layout",
    type=click.Choice(["dsagent"]),
    default="dsagent",
    show_default=True,
    help="Folder layout to write: DS-Agent/MLAgentBench's env/ and scripts/.",
)
@tasks_dir_option
def export(task: str, out: Path, layout: str, tasks_dir: Path | None) -> None:
    """Write TASK (prepared) at OUT in another benchmark's layout, test labels kept for its submission.py."""
    from dsagent_cbr.tasks.export import export_dsagent

    folder = export_dsagent(
        load_task(find_task(task, _tasks_dir(tasks_dir)), require_data=True), out
    )
    click.echo(
        f"{folder}: env/ (data, train.py, submission.py) and scripts/research_problem.txt ({layout} layout)"
    )


@click.command("run")
@click.argument("task_dir")
@click.argument("script", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@sandbox_options
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Run folder (default: runs/<task>/run-<time>/).",
)
@json_option
def run(
    task_dir: str,
    script: Path,
    timeout: float,
    memory: float,
    disk: float,
    allow_network: bool,
    no_sandbox: bool,
    out: Path | None,
    as_json: bool,
) -> None:
    """Run SCRIPT on the task in a sandbox, print its validation and test metric, save result.json."""
    from dsagent_cbr.harness.plan import hold_out
    from dsagent_cbr.harness.run import run_script
    from dsagent_cbr.harness.upload import write_submission

    settings = load_settings()
    task = load_task(find_task(task_dir, settings.tasks_dir), require_data=True)
    run_dir = out or settings.runs_dir / task.name / time.strftime("run-%Y%m%d-%H%M%S")
    if (run_dir / "workspace").exists():
        raise CbrError(f"{run_dir} already holds a run; choose another --out.")
    result = run_script(
        task,
        script,
        run_dir=run_dir,
        policy=policy_from(timeout, memory, disk, allow_network, no_sandbox),
    )
    # what to upload: the test rows only, where the workspace's file also holds the selection rows cbr graded
    submission = (
        write_submission(task, hold_out(task), Path(result.workspace), run_dir)
        if result.ok
        else None
    )
    if as_json:
        click.echo(result.to_json())
    else:
        arrow = "higher is better" if task.direction == "maximize" else "lower is better"
        click.echo(f"task:       {task.name} ({task.metric_name}, {arrow})")
        click.echo(f"status:     {result.status}" + (f" — {result.error}" if result.error else ""))
        click.echo(
            f"selection:  {result.selection_metric} ({result.selection_rows} held-back rows)"
            if result.selection_rows
            else "selection:  none (the task has no selection rows)"
        )
        click.echo(f"validation: {result.valid_metric} (printed by the script)")
        click.echo(
            f"test:       {result.test_metric if result.test_answers else 'no test answers'}"
        )
        click.echo(
            f"time:       {result.wall_time:.1f}s, peak memory {result.peak_memory_mb:.0f} MB"
        )
        click.echo(
            f"sandbox:    {'bubblewrap' if result.isolated else 'NONE (--no-sandbox)'}"
            f"{', network allowed' if result.network else ''}"
        )
        click.echo(f"result:     {run_dir / 'result.json'}")
        if submission is not None:
            click.echo(f"submission: {submission} (the test rows only: the file to upload)")
    if not result.ok:
        raise SystemExit(1)


# ---------------------------------------------------------------- cbr tasks new / kaggle-example


@tasks.command("new")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--train", "train", type=click.Path(path_type=Path), default=None, help="Labelled CSV."
)
@click.option(
    "--test",
    "test",
    type=click.Path(path_type=Path),
    default=None,
    help="CSV of the rows to predict.",
)
@click.option(
    "--sample-submission",
    "sample",
    type=click.Path(path_type=Path),
    default=None,
    help="CSV in the format to submit: the id column, then the target column(s).",
)
@click.option(
    "--from-kaggle-folder",
    "kaggle_folder",
    type=click.Path(path_type=Path),
    default=None,
    help="A folder with train.csv, test.csv and sample_submission.csv.",
)
@click.option(
    "--kaggle",
    "slug",
    default=None,
    help="Download a Kaggle competition's files first (needs credentials).",
)
@click.option(
    "--example",
    type=click.Choice(EXAMPLES),
    default=None,
    help="One of cbr's Kaggle-shaped folders, built offline (see `cbr tasks kaggle-example`).",
)
@click.option("--target", "target", multiple=True, help="Target column (repeat for several).")
@click.option(
    "--id", "id_column", default=None, help="Id column (default: sample_submission's first column)."
)
@click.option("--metric", default=None, help="Metric (default: chosen by task type).")
@click.option("--text-column", default=None, help="Make it a text task on this free-text column.")
@click.option(
    "--task-type",
    default=None,
    type=click.Choice(
        [
            "regression",
            "binary-classification",
            "multiclass-classification",
            "multilabel-classification",
        ]
    ),
    help="Override the inferred task type.",
)
@click.option(
    "--holdout",
    type=float,
    default=None,
    help="Carve this share of train into a labelled hold-out test set (answers in private/).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the hold-out split.")
@click.option(
    "--source", default=None, help="Where the data comes from, for task.toml's source line."
)
def new(
    dest: Path,
    train: Path | None,
    test: Path | None,
    sample: Path | None,
    kaggle_folder: Path | None,
    slug: str | None,
    example: str | None,
    target: tuple[str, ...],
    id_column: str | None,
    metric: str | None,
    text_column: str | None,
    task_type: str | None,
    holdout: float | None,
    seed: int,
    source: str | None,
) -> None:
    """Make a task folder DEST from CSV files or a Kaggle competition folder, saying what it inferred."""
    import tempfile

    from dsagent_cbr.tasks.create import NewTaskRequest, create_task
    from dsagent_cbr.tasks.user_files import kaggle_files

    if sum(x is not None for x in (train, kaggle_folder, slug, example)) != 1:
        raise CbrError(
            "Give exactly one of --train CSV, --from-kaggle-folder FOLDER, --kaggle SLUG or "
            "--example NAME."
        )
    with tempfile.TemporaryDirectory(prefix="cbr-kaggle-") as scratch:
        if slug is not None or example is not None:
            kaggle_folder, source = _fetched(slug, example, Path(scratch), source)
        if kaggle_folder is not None:
            train, found_test, found_sample, found_source = kaggle_files(kaggle_folder)
            test, sample = test or found_test, sample or found_sample
            source = source or found_source or f"Kaggle-style folder {kaggle_folder.name}"
        assert train is not None
        report = create_task(
            NewTaskRequest(
                dest=dest,
                train=train,
                test=test,
                sample=sample,
                target=target,
                id_column=id_column,
                metric=metric,
                text_column=text_column,
                task_type=task_type,
                holdout=holdout,
                seed=seed,
                source=source,
            )
        )
    for line in new_task_lines(report):
        click.echo(line)
    click.echo(f"{'next:':<11} cbr develop {dest}   or   cbr deploy {dest}")


def _fetched(
    slug: str | None, example: str | None, scratch: Path, source: str | None
) -> tuple[Path, str | None]:
    """(the Kaggle-shaped folder, its source line) of --kaggle SLUG, downloaded, or of --example
    NAME, built offline, in `scratch`."""
    if example is not None:
        from dsagent_cbr.tasks.recipes.kaggle_folders import FOLDERS

        return FOLDERS[example](scratch / example), source
    from dsagent_cbr.ingest.kaggle_data import download_competition

    assert slug is not None
    found = download_competition(slug, scratch)
    return found, source or f"Kaggle competition {slug} (downloaded with the Kaggle API)"


def new_task_lines(report: NewTaskReport) -> list[str]:
    """What `tasks new` inferred, each with its reason (a Kaggle user checks the metric line), and
    the files it wrote."""
    lines = [f"{key + ':':<11} {text}" for key, text in report.lines]
    return [*lines, f"{'wrote:':<11} {report.dest}/ ({', '.join(report.files)})"]


@tasks.command("kaggle-example")
@click.argument("name", type=click.Choice(EXAMPLES))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
def kaggle_example(name: str, out: Path) -> None:
    """Write a Kaggle-shaped folder (train.csv, test.csv, sample_submission.csv) built from a real
    dataset in an installed package: feedback (essays, six scores), credit (tabular), debates (text
    beside a column), carriers (tabular, 14 classes, one probability column each)."""
    from dsagent_cbr.tasks.recipes.kaggle_folders import FOLDERS

    if out.exists() and any(out.iterdir()):
        raise CbrError(f"{out} already exists and is not empty.")
    folder = FOLDERS[name](out)
    click.echo(f"wrote {folder}/: {', '.join(sorted(p.name for p in folder.iterdir()))}")
    click.echo(f"source: {(folder / 'source.txt').read_text(encoding='utf-8').strip()}")
