"""`cbr predict RUN_DIR NEW.csv [-o OUT.csv]`: re-run a run's solution in the sandbox on new rows.

The solution (best_solution.py at the run folder's root; solution.py in older deploy runs) runs on a copy of the
task whose test file is NEW.csv: the same public training files, no answers. The predictions come back
in the submission format (the id column, then the target or class columns), one row per row of
NEW.csv, in its order. A blend's members run one by one, each as the run's submission took it
(commands/predict_blend.py)."""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from dsagent_cbr.bounded import Unreadable, read_json
from dsagent_cbr.commands.options import policy_from, sandbox_options
from dsagent_cbr.config import load_settings
from dsagent_cbr.errors import CbrError
from dsagent_cbr.files import fresh_folder, write_text_atomic
from dsagent_cbr.harness.grading import EXTRA_COLUMNS
from dsagent_cbr.harness.readers import (
    ArtefactError,
    FitRounds,
    read_bytes,
    read_csv,
    read_fit_rounds,
)
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.saying import doing

SOLUTION_FILES = ("best_solution.py", "solution.py")
SAMPLE_FILE = "sample_submission.csv"


def run_solution(run_dir: Path) -> Path:
    for name in SOLUTION_FILES:
        if (run_dir / name).is_file():
            return run_dir / name
    raise CbrError(
        f"{run_dir} holds no {' or '.join(SOLUTION_FILES)}: that run kept no solution to re-run."
    )


def submitted_refit(run_dir: Path) -> dict | None:
    """The record of the refit on every labelled row the run's submission came from (summary.json's
    refit, when its status is ok); None when the submission was a first fit."""
    try:
        summary = read_json(run_dir / "summary.json")
    except Unreadable:
        return None
    refit = summary.get("refit") if isinstance(summary, dict) else None
    return refit if isinstance(refit, dict) and refit.get("status") == "ok" else None


def cut_rounds(refit: dict) -> list[str]:
    """The boosters the run's refit stopped at its deadline short of its first fit's rounds, as "61 of
    87 rounds": such a refit is submitted when each built half or more (agent/refit.py), and a refit
    given the time builds them all, so it cannot remake the submission to the digit."""
    rounds = refit.get("rounds")
    pairs = [r for r in rounds if _counts(r)] if isinstance(rounds, list) else []
    return [f"{built} of {first} rounds" for first, built in pairs if built < first]


def _counts(pair: object) -> bool:
    """[first fit's rounds, the refit's own], as two whole numbers."""
    return isinstance(pair, list) and len(pair) == 2 and all(type(n) is int for n in pair)


def first_fit(run_dir: Path) -> FitRounds | None:
    """The rounds the selected script's boosters kept in its first fit, which the run's refit stopped at
    (untrusted/bootstrap.py); None for a blend (its script tells each member's) or where unknown."""
    from dsagent_cbr.agent.record import load_record
    from dsagent_cbr.agent.rundir import row_workspace

    try:
        record = load_record(run_dir)
    except CbrError:
        return None
    best = next((r for r in record.rows if r.iteration == record.best_iteration), None)
    return None if best is None else read_fit_rounds(row_workspace(run_dir, best.script))


def run_task_dir(run_dir: Path, tasks_dir: Path, given: str | None) -> Path:
    """The task folder of a run: --task, else config.json's task_dir, else the task named in the run's
    record (summary.json), under the tasks folder."""
    from dsagent_cbr.tasks.finding import find_task

    if given:
        return find_task(given, tasks_dir)
    with contextlib.suppress(Unreadable):
        config = read_json(run_dir / "config.json")
        task_dir = config.get("task_dir") if isinstance(config, dict) else None
        if isinstance(task_dir, str) and task_dir and Path(task_dir).is_dir():
            return Path(task_dir)
    from dsagent_cbr.agent.record import load_record

    with contextlib.suppress(CbrError):
        return find_task(load_record(run_dir).task, tasks_dir)
    raise CbrError(f"Cannot tell which task {run_dir} ran on; give it with --task TASK_DIR.")


def _new_rows(task: Any, new_csv: Path, notes: list[str]) -> Any:
    """NEW.csv with the test file's columns, in its order; an id column made up if it has none."""
    from dsagent_cbr.tasks.user_files import read_csv

    new = read_csv(new_csv, "The file to predict")
    expected = list(read_csv(task.public_dir / task.test_file, "The task's test file").columns)
    idc = task.id_column
    if idc not in new.columns:
        new.insert(0, idc, range(len(new)))
        notes.append(f"{new_csv.name} has no {idc!r} column: rows are numbered 0..{len(new) - 1}")
    missing = [c for c in expected if c not in new.columns]
    if missing:
        raise CbrError(
            f"{new_csv} lacks the column(s) {', '.join(map(repr, missing))} that the task's test file has."
        )
    extra = [c for c in new.columns if c not in expected]
    if extra:
        notes.append(f"ignored column(s) {', '.join(extra)}")
    if not new[idc].is_unique:
        raise CbrError(f"The id column {idc!r} of {new_csv} is not unique.")
    return new[expected]


def _with_new_rows(task: Any, new: Any, columns: list[str], public: Path) -> Any:
    """A copy of the task whose public files are in `public`, with `new` as its test file (and a
    sample submission of its ids), and no answers."""
    import pandas as pd

    from dsagent_cbr.harness.workspace import copy_entry

    for name in task.public_files:
        if name not in (task.test_file, SAMPLE_FILE) and (task.public_dir / name).exists():
            (public / name).parent.mkdir(parents=True, exist_ok=True)
            # copied: a workspace takes no links
            copy_entry(task.public_dir / name, public / name)
    new.to_csv(public / task.test_file, index=False)
    if SAMPLE_FILE in task.public_files:
        pd.DataFrame({task.id_column: new[task.id_column], **{c: 0 for c in columns}}).to_csv(
            public / SAMPLE_FILE, index=False
        )
    return replace(task, public_dir=public, answers=None)


def _predictions(
    copy: Any, held: Any, workspace: Path, new: Any, new_name: str, columns: list[str]
) -> Any:
    """The solution's predictions for the new rows, read from its workspace as the grader reads a
    submission, in the new rows' order."""
    from dsagent_cbr.harness.upload import test_rows_only

    produced = Path(copy.predictions or "submission.csv")
    idc = copy.id_column
    wanted = list(dict.fromkeys([idc, *columns]))
    try:
        raw = read_bytes(workspace, produced.name)
        # the selection rows' predictions stay out, and the new rows get their own ids back
        raw = test_rows_only(copy, held, raw) if held is not None else raw
        sub = read_csv(
            raw,
            produced.name,
            wanted=wanted,
            max_rows=len(new),
            max_columns=len(wanted) + EXTRA_COLUMNS,
        )
    except ArtefactError as exc:
        raise CbrError(f"The solution's predictions cannot be used: {exc}.") from exc
    sub = sub[wanted]
    if sub[idc].duplicated().any() or set(sub[idc].astype(str)) != set(new[idc].astype(str)):
        raise CbrError(
            f"The solution's {produced.name} does not have one row per row of {new_name}."
        )
    order = {v: i for i, v in enumerate(new[idc].astype(str))}
    sub = sub.iloc[sub[idc].astype(str).map(order).argsort()]
    return sub


def predict_rows(
    run_dir: Path,
    new_csv: Path,
    out: Path | None = None,
    *,
    task_dir: str | None = None,
    policy: SandboxPolicy | None = None,
) -> tuple[Path, list[str]]:
    """Write the run's predictions for NEW.csv; returns (output path, notes)."""
    from dsagent_cbr.commands.predict_blend import blend_note, predict_blend, submitted_blend
    from dsagent_cbr.harness.plan import hold_out
    from dsagent_cbr.tasks.loader import load_task

    if not run_dir.is_dir():
        raise CbrError(f"No run folder at {run_dir}.")
    script = run_solution(run_dir)
    task = load_task(run_task_dir(run_dir, load_settings().tasks_dir, task_dir))
    if task.data_format != "csv" or not task.test_file or not task.id_column:
        raise CbrError(
            f"cbr predict works on csv tasks with a test file and an id column; {task.name} is not one."
        )
    notes: list[str] = []
    new = _new_rows(task, new_csv, notes)
    columns = list(task.classes) if task.metric_name == "logloss" else list(task.target)
    folder = fresh_folder(run_dir, "predict-")  # its own, however many predict at once
    with tempfile.TemporaryDirectory(prefix=f"cbr-predict-{task.name}-") as scratch:
        copy = _with_new_rows(task, new, columns, Path(scratch))
        held = hold_out(copy)  # where the run hid its held rows, and the ids it gave the new rows
        fits = submitted_blend(run_dir)
        if held is not None and fits:
            notes.append(blend_note(fits))
            workspace = predict_blend(copy, held, run_dir, fits, folder, policy)
        else:
            rows = f"{len(new):,} rows of {new_csv.name}"
            workspace = _rerun(copy, run_dir, script, folder, policy, notes, rows)
    sub = _predictions(copy, held, workspace, new, new_csv.name, columns)
    out = out or folder / "submission.csv"
    write_text_atomic(out, sub.to_csv(index=False))
    return out, notes


def _rerun(
    copy: Any,
    run_dir: Path,
    script: Path,
    folder: Path,
    policy: SandboxPolicy | None,
    notes: list[str],
    rows: str,
) -> Path:
    """The run's solution once more on `copy`, refit on every labelled row where the run's submission
    was; returns the workspace it left. `rows`: the new rows, in words."""
    from dsagent_cbr.harness.run import run_script

    # the submitted model learned every labelled row: so does this one
    made = submitted_refit(run_dir)
    refit = made is not None
    if made is not None:
        notes.append(
            "the solution learns from every labelled row, as the run's submission did (its refit)"
        )
        if cut := cut_rounds(made):
            notes.append(
                f"the run's refit stopped at its deadline after {', '.join(cut)}; this one builds "
                "them all, so its predictions differ a little from the submission's"
            )
    learns = "learning from every labelled row, then " if refit else ""
    with doing(f"running {script.name} in the sandbox: {learns}predicting {rows}"):
        told = first_fit(run_dir) if refit else None
        result = run_script(
            copy, script, run_dir=folder, policy=policy, refit=refit, first_fit=told
        )
    if not result.ok:
        raise CbrError(f"The solution failed on {rows} ({result.status}): {result.error}")
    return Path(result.workspace)


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("new_csv", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the predictions "
    "(default: RUN_DIR/predict-<time>-<random>/submission.csv).",
)
@click.option(
    "--task",
    "task_dir",
    default=None,
    help="The run's task folder, if the run folder does not say.",
)
@sandbox_options
def predict(
    run_dir: Path,
    new_csv: Path,
    out: Path | None,
    task_dir: str | None,
    timeout: float,
    memory: float,
    disk: float,
    allow_network: bool,
    no_sandbox: bool,
) -> None:
    """Re-run RUN_DIR's solution in the sandbox with NEW_CSV as the test file; write its predictions."""
    path, notes = predict_rows(
        run_dir,
        new_csv,
        out,
        task_dir=task_dir,
        policy=policy_from(timeout, memory, disk, allow_network, no_sandbox),
    )
    for note in notes:
        click.echo(f"note:        {note}")
    click.echo(f"predictions: {path}")
