"""`cbr bank build|rebuild|search|add|keep|import|list|show|stats|export|remove|recheck`."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from dsagent_cbr.bank.checks import CASE_MODALITIES, CASE_TASK_TYPES, FILE_SOURCE_KINDS, KINDS
from dsagent_cbr.commands.options import bank_options, json_option
from dsagent_cbr.commands.printing import printable
from dsagent_cbr.errors import CbrError

_KIND = click.option(
    "--kind",
    type=click.Choice(KINDS),
    default="insight",
    show_default=True,
    help="Which collection.",
)


def store_options(fn: Any) -> Any:
    """The bank options every command shares, and the two only bank commands take."""
    fn = bank_options(fn)
    fn = click.option(
        "--embedding-model",
        default=None,
        help="sentence-transformers model name or path (default: all-MiniLM-L6-v2, packaged).",
    )(fn)
    return click.option(
        "--casebank-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Seed bank folder (default: the project's casebank/).",
    )(fn)


def _settings(opts: dict[str, Any]) -> Any:
    from dsagent_cbr.config import load_settings

    return load_settings(
        store=opts.get("store"),
        chroma_url=opts.get("chroma_url"),
        bank_dir=opts.get("bank_dir"),
        casebank_dir=opts.get("casebank_dir"),
        embedding_model=opts.get("embedding_model"),
    )


def _open(opts: dict[str, Any], seed: bool = True) -> Any:
    from dsagent_cbr.bank import open_bank

    return open_bank(_settings(opts), seed=seed)


MODALITY_CHOICES = [m for m in CASE_MODALITIES if m]
TASK_TYPE_CHOICES = [t for t in CASE_TASK_TYPES if t]


def _where(
    modality: str | None, source_kind: str | None, task_type: str | None
) -> dict[str, Any] | None:
    where = {
        k: v
        for k, v in {"modality": modality, "kind": source_kind, "task_type": task_type}.items()
        if v
    }
    return where or None


_FILTERS = [
    click.option("--modality", default=None, help="Only this modality."),
    click.option(
        "--source-kind", default=None, help="Only writeup, notebook or retained (insights)."
    ),
    click.option("--task-type", default=None, help="Only this task type."),
]


def filter_options(fn: Any) -> Any:
    for opt in reversed(_FILTERS):
        fn = opt(fn)
    return fn


def _status(message: str) -> Any:
    """A spinner on a terminal; silence when piped."""
    from contextlib import nullcontext

    from rich.console import Console

    console = Console(stderr=True)
    return console.status(message) if sys.stderr.isatty() else nullcontext()


@click.group()
def bank() -> None:
    """Build, search and edit the case bank."""


@bank.command("build")
@store_options
@click.option("--rebuild", is_flag=True, help="The same as `cbr bank rebuild`.")
def build(rebuild: bool, **opts: Any) -> None:
    """Index the seed bank (casebank/); only changed files are re-embedded. Seed cases you removed come back."""
    if rebuild:
        _rebuild(opts)
        return
    with _status("Indexing the seed bank..."):
        b = _open(opts, seed=False)
        report = b.ensure_seeded(force=True)
    for line in b.seed_problems:
        click.echo(f"skipped {line}", err=True)
    click.echo(
        f"{report.summary()}; embedded {b.embedder.stats.computed} text(s), "
        f"{b.embedder.stats.cached} from cache."
    )
    _print_counts(b.stats())


@bank.command("rebuild")
@store_options
def rebuild_cmd(**opts: Any) -> None:
    """Make a new index from the seed files and the bank's journal, then switch to it.

    The fix for a damaged index. The old index stays in use until the new one is complete; an interrupted
    rebuild is finished or rolled back by the next command."""
    _rebuild(opts)


def _rebuild(opts: dict[str, Any]) -> None:
    from dsagent_cbr.bank import rebuild_bank

    with _status("Rebuilding the index..."):
        b, report = rebuild_bank(_settings(opts))
    for line in b.seed_problems:
        click.echo(f"skipped {line}", err=True)
    data = b.stats()
    click.echo(
        f"rebuilt the index at {data['location']}: {len(report.added)} case(s), {data['user_cases']} of "
        f"them from the journal; embedded {b.embedder.stats.computed} text(s), "
        f"{b.embedder.stats.cached} from cache."
    )
    _print_counts(data)


@bank.command("search")
@click.argument("text")
@_KIND
@click.option("-k", "--k", "k", default=5, show_default=True, help="How many cases.")
@click.option("--exclude-task", default=None, help="Leave out solution cases of this task.")
@json_option
@filter_options
@store_options
def search(
    text: str,
    kind: str,
    k: int,
    exclude_task: str | None,
    as_json: bool,
    modality: str | None,
    source_kind: str | None,
    task_type: str | None,
    **opts: Any,
) -> None:
    """Nearest cases to TEXT (or to the contents of TEXT when it names a file)."""
    query = Path(text).read_text(encoding="utf-8") if Path(text).is_file() else text
    b = _open(opts)
    hits = b.search(
        query,
        kind=kind,
        k=k,
        where=_where(modality, source_kind, task_type),
        exclude_task=exclude_task,
    )
    if as_json:
        click.echo(
            json.dumps(
                [{"score": h.score, **h.case.to_dict()} for h in hits], indent=2, default=str
            )
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("score", "id", "modality", "kind", "title")
    for h in hits:
        table.add_row(
            f"{h.score:.3f}", h.case.id, h.case.modality, h.case.source_kind, h.case.title[:70]
        )
    Console().print(table)


@bank.command("add")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--modality", type=click.Choice(MODALITY_CHOICES), default=None, help="Modality of the case."
)
@click.option("--competition", default="", help="Competition slug.")
@click.option("--url", default="", help="Source URL.")
@click.option(
    "--source-kind",
    type=click.Choice(FILE_SOURCE_KINDS),
    default="writeup",
    show_default=True,
    help="Where the insight comes from.",
)
@click.option("--task-type", type=click.Choice(TASK_TYPE_CHOICES), default=None, help="Task type.")
@store_options
def add(
    file: Path,
    modality: str | None,
    competition: str,
    url: str,
    source_kind: str,
    task_type: str | None,
    **opts: Any,
) -> None:
    """Add one insight from a text or markdown file (front matter, if any, wins over the options).

    A case holds at most 100,000 characters of text; split longer write-ups into several files."""
    from dsagent_cbr.bank.casefiles import insight_from_text, read_text_file
    from dsagent_cbr.bank.checks import problem_with, problem_with_file_case

    try:
        case = insight_from_text(
            read_text_file(file),
            stem=file.stem,
            modality=modality or "",
            competition=competition,
            source_kind=source_kind,
            origin=str(file),
        )
    except ValueError as exc:
        raise CbrError(f"{file}: {exc}.") from exc
    if url:
        case.source_url = url
    if task_type:
        case.task_type = task_type
    refused = problem_with(case) or problem_with_file_case(case)
    if refused:
        raise CbrError(f"{file}: {refused}; nothing was added.")
    report = _open(opts).add([case])
    if report.failed:
        raise CbrError(f"{file}: {report.failed[0][1]}.")
    click.echo(f"{'added' if report.added else 'already present'}: {case.id}")


@bank.command("keep")
@click.argument("run", type=click.Path(path_type=Path))
@store_options
def keep(run: Path, **opts: Any) -> None:
    """Keep the answered analysis of a `cbr analyze` run folder RUN as a case: later analyses of other
    questions see it as an example; one of the same question never does."""
    from dsagent_cbr.analysis.cases import analysis_case

    if not run.is_dir():
        raise CbrError(f"No run folder at {run}.")
    case = analysis_case(run.resolve(), "kept")
    report = _open(opts, seed=False).add([case])
    if report.failed:
        raise CbrError(f"{run}: {report.failed[0][1]}; nothing was kept.")
    kept = "kept" if report.added else "already kept"
    click.echo(f"{kept}: analysis {case.id} ({printable(case.title)})")


@bank.command("import")
@click.argument("folder", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--modality",
    type=click.Choice(MODALITY_CHOICES),
    default=None,
    help="Modality for every file (default: from folder names).",
)
@click.option(
    "--source-kind",
    type=click.Choice(FILE_SOURCE_KINDS),
    default=None,
    help="For every file (default: from file names).",
)
@click.option("--skip-bad", is_flag=True, help="Import the good files even when some are bad.")
@store_options
def import_(
    folder: Path, modality: str | None, source_kind: str | None, skip_bad: bool, **opts: Any
) -> None:
    """Import a folder of .txt, .md or .case insight files; any bad file stops the import (bank unchanged).

    A file is bad when it is not UTF-8 text, is empty, has broken front matter or values outside the
    allowed sets, claims source kind `retained` (only runs retain), or holds more than 100,000 characters
    of text. Links inside FOLDER are never followed: each is skipped with one line. Imports running at
    once each report only the cases they wrote."""
    from dsagent_cbr.bank.casefiles import load_import_folder

    loaded = load_import_folder(folder, modality=modality or "", source_kind=source_kind or "")
    for line in loaded.skipped:
        click.echo(f"skipped {line}", err=True)
    if loaded.problems and not skip_bad:
        raise CbrError(
            f"{len(loaded.problems)} file(s) cannot be imported; the bank is unchanged "
            "(fix them or pass --skip-bad).",
            details=loaded.problems,
        )
    for line in loaded.problems:
        click.echo(f"skipped {line}", err=True)
    with _status(f"Embedding {len(loaded.cases)} case(s)..."):
        b = _open(opts)
        report = b.add(loaded.cases, all_or_nothing=True)
    if report.failed:
        raise CbrError(
            "Some cases were refused; the bank is unchanged.",
            details=[f"{i}: {why}" for i, why in report.failed],
        )
    click.echo(f"{report.summary()} (from {len(loaded.cases)} file(s)).")


@bank.command("list")
@_KIND
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@click.option(
    "--retained", is_flag=True, help="Only what runs retained (the same as --source-kind retained)."
)
@filter_options
@store_options
def list_cases(
    kind: str,
    as_json: bool,
    retained: bool,
    modality: str | None,
    source_kind: str | None,
    task_type: str | None,
    **opts: Any,
) -> None:
    """List cases, optionally filtered; a retained case shows the run and iteration it came from (take
    it back out with `cbr bank remove ID`)."""
    cases = _open(opts).list(
        kind, _where(modality, "retained" if retained else source_kind, task_type)
    )
    for c in sorted(cases, key=lambda c: (c.modality, c.competition, c.title)):
        if as_json:
            click.echo(json.dumps(c.to_dict(), default=str))
            continue
        origin = (
            f"  run {c.extra['run']}, iteration {c.extra.get('iteration')}"
            if c.extra.get("run")
            else ""
        )
        name = printable((c.task_name or c.title)[:70])
        click.echo(
            f"{c.id}  {c.modality or '?':<12} {c.source_kind or '?':<9} {name}{printable(origin)}"
        )


@bank.command("show")
@click.argument("case_id")
@json_option
@store_options
def show(case_id: str, as_json: bool, **opts: Any) -> None:
    """Print one case."""
    case = _open(opts).get(case_id)
    if case is None:
        raise CbrError(f"No case with id {case_id} in the bank.")
    data = case.to_dict()
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    text, script = data.pop("text"), data.pop("script")
    # a case's text came from a page, a notebook or a run folder: shown, never run by the terminal
    for key, value in data.items():
        if value not in ("", None, {}):
            click.echo(f"{key}: {printable(str(value))}")
    click.echo("\n" + printable(text, lines=True))
    if script:
        click.echo("\n--- script ---\n" + printable(script, lines=True))


@bank.command("stats")
@json_option
@store_options
def stats(as_json: bool, **opts: Any) -> None:
    """Counts by collection, modality and source kind."""
    data = _open(opts).stats()
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(f"store {data['store']} at {data['location']}, model {data['embedding_model']}")
        click.echo(f"journal {data['journal']}: {data['user_cases']} user case(s)")
        _print_counts(data)


@bank.command("export")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@store_options
def export(path: Path, **opts: Any) -> None:
    """Write every case as a JSON line to PATH."""
    click.echo(f"exported {_open(opts).export(path)} case(s) to {path}")


@bank.command("remove")
@click.argument("ids", nargs=-1, required=True)
@store_options
def remove(ids: tuple[str, ...], **opts: Any) -> None:
    """Remove cases by id."""
    removed = _open(opts).remove(list(ids))
    missing = sorted(set(ids) - set(removed))
    click.echo(f"removed {len(removed)} case(s)")
    if missing:
        raise CbrError(f"No case with id {', '.join(missing)} in the bank.")


@bank.command("recheck")
@click.argument("tasks", nargs=-1)
@click.option("--dry-run", is_flag=True, help="Say what would be dropped; drop nothing.")
@click.option(
    "--tasks-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where task names are also looked up (default: the project's tasks/).",
)
@store_options
def recheck_cmd(tasks: tuple[str, ...], dry_run: bool, tasks_dir: Path | None, **opts: Any) -> None:
    """Grade the retained solutions again and drop those whose selection score does not hold.

    Before the harness gave a sample submission placeholders for the rows it holds back, a script could
    read their labels there; a solution retained from such a task is run again in the sandbox on its task
    (TASKS: folders or names, by default every task cbr finds), and dropped with its insight when its
    score falls. One line per retained solution."""
    from dsagent_cbr.agent.recheck import recheck
    from dsagent_cbr.sandbox import SandboxPolicy, require_sandbox
    from dsagent_cbr.tasks.finding import all_tasks, find_task
    from dsagent_cbr.tasks.loader import load_task

    recipes = tasks_dir or _settings(opts).tasks_dir
    require_sandbox(True)
    if tasks:
        given = (load_task(find_task(name, recipes), require_data=True) for name in tasks)
        found = {t.name: t for t in given}
    else:  # every task cbr finds that can be run (a recipe not prepared cannot judge anything)
        found = {
            t.name: t for t in map(_loaded, (f.path for f in all_tasks(recipes))) if t is not None
        }

    def say(verdict: Any) -> None:
        click.echo(
            f"{verdict.case.id}  {verdict.outcome:<11} {verdict.case.task_name}: {verdict.why}"
        )

    with tempfile.TemporaryDirectory(prefix="cbr-recheck-") as folder:
        verdicts = recheck(
            _open(opts), found, SandboxPolicy(), Path(folder), dry_run=dry_run, say=say
        )
    dropped = sum(v.outcome == "dropped" for v in verdicts)
    click.echo(
        f"{len(verdicts)} retained solution(s): {dropped} {'would be ' if dry_run else ''}dropped"
    )


def _loaded(path: Path) -> Any:
    from dsagent_cbr.tasks.loader import TaskError, load_task

    try:
        return load_task(path, require_data=True)
    except TaskError:
        return None


def _print_counts(data: dict[str, Any]) -> None:
    for kind in KINDS:
        part = data[kind]
        mods = ", ".join(f"{k} {v}" for k, v in sorted(part["by_modality"].items()))
        click.echo(f"{kind}s: {part['count']}" + (f" ({mods})" if mods else ""))
