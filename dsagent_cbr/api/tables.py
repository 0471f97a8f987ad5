"""A DataFrame as the files a command reads: a task folder, made by the code `cbr tasks new` runs
(tasks/create.py), or a CSV file for `cbr analyze`. Each is named by a digest of its content and
options, so that a notebook's cell run again finds the folder it made the first time."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

# the share of a DataFrame's rows held out as its test rows when no test rows are given: they are
# labelled, so the run gets a test score (cbr tasks new --holdout)
HOLDOUT = 0.2
OPTIONS = ("holdout", "metric", "id_column")  # `cbr tasks new`'s, as task_folder takes them


def is_frame(data: Any) -> bool:
    return hasattr(data, "to_csv") and hasattr(data, "columns")


def write_frame(frame: Any, path: Path) -> Path:
    """The frame as a CSV file; a named index (an id column set as the index) is a column of it."""
    (frame.reset_index() if frame.index.name else frame).to_csv(path, index=False)
    return path


def digest(paths: list[Path | None], options: dict[str, Any]) -> str:
    sha = hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode())
    for path in paths:
        sha.update(path.read_bytes() if path is not None else b"-")
    return sha.hexdigest()[:8]


def task_folder(
    train: Any,
    target: str | list[str] | None,
    test: Any,
    options: dict[str, Any],
    tasks_dir: Path,
    name: str,
) -> str:
    """The task folder `train` names, or one made of it (a DataFrame, or a CSV file) under
    `tasks_dir`, saying what `cbr tasks new` says of it. `options`: some of OPTIONS."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
    if not is_frame(train) and not Path(train).is_file():
        return str(train)  # a task folder, or a name `cbr develop` would look up
    with tempfile.TemporaryDirectory(prefix="cbr-table-") as scratch:
        train_csv = (
            write_frame(train, Path(scratch) / "train.csv") if is_frame(train) else Path(train)
        )
        test_csv = (
            write_frame(test, Path(scratch) / "test.csv")
            if is_frame(test)
            else (Path(test) if test is not None else None)
        )
        targets = [target] if isinstance(target, str) else list(target or [])
        holdout = options.get("holdout") or (HOLDOUT if test_csv is None else None)
        # every option named, given or not: the same rows and options are the same folder
        chosen = {k: options.get(k) for k in OPTIONS} | {"target": targets, "holdout": holdout}
        dest = tasks_dir / f"{name}-{digest([train_csv, test_csv], chosen)}"
        if (dest / "task.toml").is_file():
            from dsagent_cbr.saying import say

            say(f"the task made of this table before: {dest}")
            return str(dest)
        return str(_made(dest, train_csv, test_csv, targets, chosen))


def _made(
    dest: Path, train: Path, test: Path | None, targets: list[str], chosen: dict[str, Any]
) -> Path:
    from dsagent_cbr.commands.tasks_cmd import new_task_lines
    from dsagent_cbr.tasks.create import NewTaskRequest, create_task

    request = NewTaskRequest(
        dest=dest,
        train=train,
        test=test,
        target=tuple(targets),
        id_column=chosen.get("id_column"),
        metric=chosen.get("metric"),
        holdout=chosen["holdout"],
        source="a pandas DataFrame given to dsagent_cbr",
    )
    report = create_task(request)
    print("\n".join(new_task_lines(report)), flush=True)
    return dest


def data_file(data: Any, tables_dir: Path, name: str) -> str:
    """The CSV file `data` names, or one written of it (a DataFrame) under `tables_dir`."""
    if not is_frame(data):
        return str(data)
    with tempfile.TemporaryDirectory(prefix="cbr-table-") as scratch:
        staged = write_frame(data, Path(scratch) / "table.csv")
        path = tables_dir / f"{name}-{digest([staged], {})}.csv"
        if not path.is_file():
            from dsagent_cbr.files import write_bytes_atomic

            write_bytes_atomic(path, staged.read_bytes())
    return str(path)
