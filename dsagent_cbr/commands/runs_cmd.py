"""`cbr runs list|show|rm`: the runs made so far. A run is found through the home's index of runs
(agent/runs_index.py), wherever its command ran, and in the runs folder of the current settings (runs made
before the index, or with another home); what is shown of it is read from its folder's record
(summary.json) or, while it has none, from its config.json."""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dsagent_cbr.agent import runs_index
from dsagent_cbr.agent.record import SUMMARY, RunRecord, load_record
from dsagent_cbr.agent.rundir import SavedRun, load_config
from dsagent_cbr.clock import say_duration
from dsagent_cbr.commands.options import json_option
from dsagent_cbr.commands.printing import printable, say_score
from dsagent_cbr.config import load_settings
from dsagent_cbr.errors import CbrError

if TYPE_CHECKING:
    from dsagent_cbr.analysis.run_record import AnalysisRecord
    from dsagent_cbr.config import Settings

# a run whose record is not its final one (RunRecord.final), or that has none yet: Ctrl-C and the budget end a run
# with a final record saying so, a kill -9 or a power cut leave it as it was
UNFINISHED = "running or killed"
UNREADABLE = "unreadable record"
NONE = "—"
RUN_ID = re.compile(r"(\d{8}-\d{6})-")  # new_run_dir's ids begin with their start time
LISTED = 10  # the most candidates an ambiguity error names
# a table's width off a terminal: its columns' own (a table is only as wide as its cells)
WIDE = 1000

runs_dir_option = click.option(
    "--runs-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="A runs folder to look in besides the index of runs (default: the setting "
    "runs_dir, ./runs).",
)


@dataclass(frozen=True)
class Found:
    folder: Path  # resolved
    task: str
    started: datetime


@dataclass
class RunView:
    """One run as `cbr runs` shows it: its record's facts, or its config's while it has no record."""

    found: Found
    record: RunRecord | None
    config: SavedRun | None
    outcome: str
    analysis: AnalysisRecord | None = None  # a `cbr analyze` run's summary

    @property
    def id(self) -> str:
        return self.found.folder.name

    @property
    def task(self) -> str:
        return self.record.task if self.record else self.found.task

    @property
    def kind(self) -> str:
        if self.analysis:
            return self.analysis.kind
        if self.record:
            return self.record.kind
        if self.config:
            # only develop and deploy save one
            return "develop" if self.config.develop is not None else "deploy"
        return NONE

    @property
    def model(self) -> str:
        if self.analysis:
            return self.analysis.model or NONE
        return (
            self.record.model
            if self.record
            else (self.config.settings.model if self.config else NONE)
        )

    @property
    def took(self) -> float | None:
        if self.analysis:
            return self.analysis.seconds
        return self.record.took if self.record else None

    def as_json(self) -> dict[str, Any]:
        r, a = self.record, self.analysis
        asked = {"question": a.question, "answers": a.answers} if a else {}
        return {
            "id": self.id,
            "task": self.task,
            "kind": self.kind,
            "model": self.model,
            "metric": r.metric if r else None,
            "selection": r.best_selection if r else None,
            "outcome": self.outcome,
            "stopped": r.stopped if r else (a.stopped if a else None),
            "took": self.took,
            "started": self.found.started.isoformat(),
            "folder": str(self.found.folder),
            **asked,
        }


def _settings(runs_dir: Path | None) -> Settings:
    return load_settings(runs_dir=runs_dir)


def _started(folder: Path) -> datetime:
    """When a run not in the index began: its id says so; a folder named otherwise, its config's time
    (written as the run began), or the folder's own."""
    named = RUN_ID.match(folder.name)
    if named:
        try:
            return datetime.strptime(named.group(1), "%Y%m%d-%H%M%S").astimezone()
        except ValueError:
            pass  # digits that are not a date (a month 13): a folder someone named
    config = folder / "config.json"
    return datetime.fromtimestamp(
        (config if config.is_file() else folder).stat().st_mtime
    ).astimezone()


def _scanned(runs_dir: Path) -> list[Path]:
    """The run folders in a runs folder: runs_dir/<task>/<run-id>/ with a config.json (the folders
    `cbr run` leaves beside them have none), and runs_dir/analyze/<data>/<run-id>/ with a
    summary.json (`cbr analyze`'s)."""
    return _runs_in(runs_dir, "config.json") + _runs_in(runs_dir / "analyze", SUMMARY)


def _runs_in(folder: Path, marker: str) -> list[Path]:
    if not folder.is_dir():
        return []
    return [
        run
        for task in folder.iterdir()
        if task.is_dir()
        for run in task.iterdir()
        if (run / marker).is_file()
    ]


def find_runs(settings: Settings) -> list[Found]:
    """Every run the index knows and every run folder in runs_dir, once each, newest first."""
    found = {e.run_dir: Found(e.run_dir, e.task, e.started) for e in runs_index.read(settings.home)}
    for folder in _scanned(settings.runs_dir):
        folder = folder.resolve()
        if folder not in found:
            found[folder] = Found(folder, folder.parent.name, _started(folder))
    return sorted(found.values(), key=lambda f: f.started, reverse=True)


def view(found: Found) -> RunView:
    """What the run's files say of it; a damaged file (bounded.py refuses it) stops no other run."""
    from dsagent_cbr.analysis.run_record import load_analysis

    # develop and deploy write a config.json; analyze does not
    if not os.path.lexists(found.folder / "config.json"):
        try:
            analysis = load_analysis(found.folder)
        except CbrError:
            return RunView(found, None, None, UNREADABLE)
        if analysis is not None:
            outcome = analysis.outcome if analysis.final else UNFINISHED
            return RunView(found, None, None, outcome, analysis)
    try:
        config: SavedRun | None = load_config(found.folder)
    except CbrError:
        # an edited or half-written config.json: the record, if any, still says the rest
        config = None
    # anything by that name (a link, a pipe) is a record to read, or an unreadable one
    if not os.path.lexists(found.folder / SUMMARY):
        return RunView(found, None, config, UNFINISHED if config else UNREADABLE)
    try:
        record = load_record(found.folder)
    except CbrError:
        return RunView(found, None, config, UNREADABLE)
    return RunView(found, record, config, str(record.outcome) if record.final else UNFINISHED)


def score(value: float | None) -> str:
    return say_score(value, NONE)


def took(seconds: float | None) -> str:
    return NONE if seconds is None else say_duration(seconds, exact=False)


def shown(path: Path) -> str:
    """A folder as a user would type it: relative to here when it is below here."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def resolve_run(ref: str, settings: Settings) -> Found:
    """A run named by its id, a unique prefix of one, or its folder's path; one sentence otherwise."""
    path = Path(ref).expanduser()
    if path.is_dir():
        if not ((path / "config.json").is_file() or (path / SUMMARY).is_file()):
            raise CbrError(f"{path} is not a run folder (no config.json).")
        folder = path.resolve()
        known = {f.folder: f for f in find_runs(settings)}
        return known.get(folder) or Found(folder, folder.parent.name, _started(folder))
    runs = find_runs(settings)
    matches = [f for f in runs if f.folder.name == ref] or [
        f for f in runs if f.folder.name.startswith(ref)
    ]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CbrError(
            f"No run {ref!r} in the index of runs or in {settings.runs_dir.resolve()} (`cbr runs "
            "list` shows the runs; give a path for a folder elsewhere)."
        )
    names = [f"{f.task}/{f.folder.name}" for f in matches[:LISTED]]
    more = f" and {len(matches) - LISTED} more" if len(matches) > LISTED else ""
    raise CbrError(f"Run id {ref!r} is ambiguous: it matches {', '.join(names)}{more}.")


@click.group()
def runs() -> None:
    """List, show and remove past runs."""


@runs.command("list")
@click.option("--task", "task_name", default=None, help="Only this task's runs.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the N newest runs.")
@runs_dir_option
@json_option
def list_runs(
    task_name: str | None, limit: int | None, runs_dir: Path | None, as_json: bool
) -> None:
    """List past runs, newest first: the index of runs in cbr's home, and the runs folder."""
    settings = _settings(runs_dir)
    views = run_views(settings, task_name, limit)
    if as_json:
        click.echo(json.dumps([v.as_json() for v in views], indent=2))
        return
    if not views:
        where = f"for task {task_name} " if task_name else ""
        click.echo(
            f"No runs {where}in {runs_index.index_path(settings.home)} or in {settings.runs_dir}."
        )
        return
    _print_table(views)


def run_views(settings: Settings, task_name: str | None, limit: int | None) -> list[RunView]:
    """The runs found, newest first, those of `task_name` only when given, the `limit` newest."""
    found = [v for v in map(view, find_runs(settings)) if task_name is None or v.task == task_name]
    return found[:limit]


def _print_table(views: list[RunView]) -> None:
    import sys

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("id", "task", "kind", "model", "metric", "selection", "outcome", "took", "folder")
    table.columns[0].no_wrap = True  # an id is what `cbr runs show` takes: never cut
    table.columns[5].justify = table.columns[7].justify = "right"
    for name_or_path in (table.columns[1], table.columns[8]):
        # on a narrow terminal a task or a path folds, never ends in an ellipsis
        name_or_path.overflow = "fold"
    for v in views:
        r = v.record
        cells = (
            v.id,
            v.task,
            v.kind,
            v.model,
            r.metric if r else NONE,
            score(r.best_selection if r else None),
            v.outcome,
            took(v.took),
            shown(v.found.folder),
        )
        # Text, not str: a name like "[bold]" is no markup of rich's, and escapes are shown, not run
        table.add_row(*(Text(printable(cell)) for cell in cells))
    # off a terminal (a pipe, a file) no width limits the table: a folded path could not be pasted back
    Console(width=None if sys.stdout.isatty() else WIDE).print(table)


@runs.command("show")
@click.argument("run")
@runs_dir_option
@json_option
def show(run: str, runs_dir: Path | None, as_json: bool) -> None:
    """Show one run: RUN is its id (the folder's name), a unique prefix of one, or its folder."""
    v = view(resolve_run(run, _settings(runs_dir)))
    if as_json:
        click.echo(
            json.dumps(
                {**v.as_json(), "record": v.record.model_dump(mode="json") if v.record else None},
                indent=2,
            )
        )
        return
    for label, value in _facts(v):
        if value:
            click.echo(f"{label + ':':<16}{printable(value)}")


def _facts(v: RunView) -> list[tuple[str, str | None]]:
    if v.analysis is not None:
        return _analysis_facts(v, v.analysis)
    r, folder = v.record, v.found.folder
    files = {
        name: shown(folder / name) if (folder / name).is_file() else None
        for name in ("report.md", "best_solution.py")
    }
    # the record's paths are as the run's command saw them (relative to where it ran): the files are
    # at the run folder's root, so they are named from there
    submission = shown(folder / Path(r.submission).name) if r and r.submission else None
    so_far = " so far" if v.outcome == UNFINISHED else ""
    return [
        ("run", v.id),
        ("folder", shown(folder)),
        ("task", f"{v.task} ({r.metric}, {r.direction})" if r else v.task),
        ("kind", v.kind),
        ("model", v.model),
        ("started", v.found.started.strftime("%Y-%m-%d %H:%M:%S")),
        ("outcome", _outcome(v)),
        ("took", took(r.took) + so_far if r else None),
        ("selection", _selection(r) + so_far if r else None),
        ("test", score(r.best_test) if r and r.best_test is not None else None),
        ("report", files["report.md"]),
        ("best solution", files["best_solution.py"]),
        ("submission", submission),
        ("resume", _resume(v)),
    ]


def _analysis_facts(v: RunView, a: AnalysisRecord) -> list[tuple[str, str | None]]:
    """An analysis as `cbr runs show` tells it: its question, data, outcome, answer and notebook."""
    from dsagent_cbr.analysis.agent import NOTEBOOK
    from dsagent_cbr.analysis.answer import say_answers

    so_far = " so far" if v.outcome == UNFINISHED else ""
    notebook = v.found.folder / NOTEBOOK
    return [
        ("run", v.id),
        ("folder", shown(v.found.folder)),
        ("question", " ".join(a.question.split())),
        ("data", ", ".join(a.files)),
        ("kind", v.kind),
        ("model", v.model),
        ("started", v.found.started.strftime("%Y-%m-%d %H:%M:%S")),
        ("outcome", v.outcome if v.outcome == UNFINISHED else f"{v.outcome} ({a.stopped})"),
        ("took", took(a.seconds) + so_far if a.seconds is not None else None),
        (
            "work",
            f"{a.cells_run} cells run, {a.cells_failed} failed; {a.calls} calls, {a.tokens} tokens"
            if a.final
            else None,
        ),
        ("answer", say_answers(a.answers) or None),
        ("notebook", shown(notebook) if notebook.is_file() else None),
    ]


def _outcome(v: RunView) -> str:
    r = v.record
    if r is None:
        return v.outcome
    if v.outcome == UNFINISHED:
        return f"{UNFINISHED} (its record was last saved after {r.iterations} iteration(s))"
    return f"{v.outcome} ({r.stopped})"


def _selection(r: RunRecord) -> str:
    if r.best_iteration is None:
        return f"{NONE} (no graded solution)"
    if r.best_selection is None:
        # no selection rows: the run chose by what the scripts printed, which is not cbr's own grade
        return f"{NONE} (chosen by {r.selected_by}: {r.metric} {score(r.best_score)}, iteration {r.best_iteration})"
    return (
        f"{r.metric} {score(r.best_selection)} (iteration {r.best_iteration}; graded by cbr on "
        f"{r.selection_rows} held-back rows)"
    )


def _resume(v: RunView) -> str | None:
    """How to go on with a run that did not end by itself (a kill, Ctrl-C, the budget, a failure of ours)."""
    unfinished = v.outcome == UNFINISHED
    if v.outcome == UNREADABLE or not (
        unfinished or (v.record is not None and v.record.outcome.ours)
    ):
        return None
    if v.kind == "deploy":
        task_dir = shlex.quote(v.config.task_dir) if v.config else "TASK_DIR"
        return f"a deploy run does not resume: run `cbr deploy {task_dir}` again"
    running = " (unless it is still running)" if unfinished else ""
    return f"cbr develop --resume {shlex.quote(shown(v.found.folder))}{running}"


@runs.command("rm")
@click.argument("run")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@runs_dir_option
def rm(run: str, yes: bool, runs_dir: Path | None) -> None:
    """Remove a run's folder, and its line in the index of runs. RUN as for `cbr runs show`."""
    from dsagent_cbr.sandbox.scratch import clear_folder

    settings = _settings(runs_dir)
    found = resolve_run(run, settings)
    v = view(found)
    # a folder without a run's config.json (or an analysis's summary) is not one cbr made: never
    # removed
    if v.analysis is None:
        load_config(found.folder)
    if not yes:
        click.confirm(
            f"Remove run {v.id} ({v.task}, {v.outcome}) and everything in {found.folder}?",
            abort=True,
        )
    try:
        # a cbr killed in the run may have left a script's scratch filesystem mounted in it: clear_folder
        # unmounts what dead cbrs left, where a plain rmtree would stop half-way at it (EBUSY)
        clear_folder(found.folder)
    except OSError as exc:
        raise CbrError(
            f"Could not remove all of {found.folder} ({exc.strerror}: {exc.filename}): is its run "
            "still running?"
        ) from None
    runs_index.remove(settings.home, found.folder)
    click.echo(f"removed {found.folder}")
