"""Run folders: runs/<task>/<run-id>/ with its config, its per-step folders and the chosen solution at its
root (its record is record.py's, its report report.py's)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dsagent_cbr.agent.runs_index import register
from dsagent_cbr.bounded import Absent, Unreadable, read_json
from dsagent_cbr.errors import CbrError
from dsagent_cbr.files import fresh_folder, write_json_atomic, write_text_atomic
from dsagent_cbr.harness.plan import Held
from dsagent_cbr.harness.upload import write_submission
from dsagent_cbr.tasks.model import Task


def new_run_dir(runs_dir: Path, task_name: str, home: Path | None = None) -> Path:
    """runs_dir/<task>/<run-id>/, the id its start time and a random tail. With `home`, the folder is also
    noted in its index of runs (runs_index.py), for `cbr runs`; without it (an experiment's runs in a
    scratch folder) it is not."""
    path = fresh_folder(runs_dir / task_name)
    if home is not None:
        # the index is a convenience (`cbr runs list` also looks in runs_dir): a home it cannot write to
        # must not stop a run
        with contextlib.suppress(OSError):
            register(home, path, task_name)
    return path


def save_config(run_dir: Path, config: dict[str, Any]) -> None:
    write_json_atomic(run_dir / "config.json", config)


class SavedSettings(BaseModel):
    """The settings `cbr develop` writes into config.json. A resume takes back these and nothing else: a
    key added to the file (base_url, say) would otherwise send the API key wherever it said."""

    model_config = ConfigDict(extra="ignore")

    model: str
    store: str | None = None
    bank_dir: str | None = None
    chroma_url: str | None = None
    runs_dir: str | None = None


class SavedRun(BaseModel):
    """A run's config.json: a run folder is just files that anyone may have edited, so its shape is checked
    before anything is taken from it (a command checks its own section, such as `develop`)."""

    model_config = ConfigDict(extra="ignore")

    task_dir: str
    settings: SavedSettings
    develop: dict[str, Any] | None = None


def load_config(run_dir: Path) -> SavedRun:
    """A run folder's config.json, or one sentence naming it and what is wrong with it."""
    path = run_dir / "config.json"
    try:
        data = read_json(path)
    except Absent:
        raise CbrError(f"{run_dir} is not a run folder (no config.json).") from None
    except Unreadable as exc:
        raise CbrError(f"{exc}.") from None
    if not isinstance(data, dict):
        kind = json_kind(data)
        raise CbrError(
            f"{path} is not a run's config cbr can read (it holds a JSON {kind}, not an object)."
        )
    try:
        return SavedRun.model_validate(data)
    except ValidationError as exc:
        raise shape_error(path, exc) from None


def json_kind(value: object) -> str:
    """What JSON calls a parsed value's type, for a sentence saying it is the wrong one."""
    kinds = {
        bool: "boolean",
        int: "number",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }
    return kinds.get(type(value), "null")


def unreadable_config(path: Path, where: str, what: str) -> CbrError:
    return CbrError(f"{path} is not a run's config cbr can read ({where}: {what}).")


def shape_error(path: Path, exc: ValidationError, within: str = "") -> CbrError:
    """The first thing pydantic found wrong with config.json (or its section `within`), as one sentence."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in (within, *first["loc"]) if part != "") or "the file"
    # the value as JSON, cut short: whatever an edited file holds reaches the terminal escaped
    got = (
        ""
        if first["type"] == "missing"
        else f", not {json.dumps(first['input'], default=str)[:60]}"
    )
    return unreadable_config(path, where, first["msg"][:1].lower() + first["msg"][1:] + got)


def step_path(run_dir: Path, iteration: int, attempt: int = 0) -> Path:
    """step-NN/ for an iteration's first run, step-NN/debug-K/ for its K-th debug attempt."""
    return run_dir / (f"step-{iteration:02d}" + (f"/debug-{attempt}" if attempt else ""))


def step_dir(run_dir: Path, iteration: int, attempt: int = 0) -> Path:
    path = step_path(run_dir, iteration, attempt)
    path.mkdir(parents=True, exist_ok=True)
    return path


def row_workspace(run_dir: Path, row_script: str | None) -> Path:
    """What a row's script left, as the harness harvested it: exec/workspace beside the script."""
    return run_dir / Path(row_script or "").parent / "exec" / "workspace"


IMPORTANCE = "feature_importance.json"


def publish_outputs(
    run_dir: Path, task: Task, code: str, workspace: Path, held: Held | None
) -> None:
    """The chosen solution where a user looks first: best_solution.py, the predictions file (the
    submission to upload, without the selection rows the run was given) and the model's feature
    importances at the run folder's root, each replaced atomically. What the script wrote is read as
    untrusted, through harness/readers.py; it was graded, so its form is known to be right."""
    from dsagent_cbr.harness.readers import ArtefactError, read_importance

    write_text_atomic(run_dir / "best_solution.py", code)
    write_submission(task, held, workspace, run_dir)
    (run_dir / IMPORTANCE).unlink(missing_ok=True)
    with contextlib.suppress(ArtefactError):
        importance = read_importance(workspace)
        if importance:
            write_text_atomic(run_dir / IMPORTANCE, json.dumps(importance, indent=1))
