"""What a user uploads: a script's predictions without its predictions of the selection rows (csv by id,
arrays by position), every other cell as the script wrote it."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from dsagent_cbr.harness.grading import EXTRA_COLUMNS, prediction_columns
from dsagent_cbr.harness.plan import Held, id_key
from dsagent_cbr.harness.readers import ArtefactError, csv_columns, read_npy
from dsagent_cbr.tasks.model import Task


def test_rows_only(task: Task, held: Held, raw: bytes) -> bytes:
    """The predictions file `raw` with the held rows' predictions taken out. It was graded, but it is
    parsed here as the untrusted file it is: one that does not parse is an ArtefactError."""
    assert task.predictions
    if task.data_format == "npy":
        buffer = io.BytesIO()
        array = read_npy(raw, task.predictions, max_items=len(raw))
        np.save(buffer, array[: held.test_rows], allow_pickle=False)
        return buffer.getvalue()
    import pandas as pd

    assert task.id_column
    columns, most = (
        csv_columns(raw, task.predictions),
        len(prediction_columns(task)) + 1 + EXTRA_COLUMNS,
    )
    if len(columns) > most:  # the grader's bound: a header of thousands of columns is not parsed
        raise ArtefactError(
            f"{task.predictions} has {len(columns)} columns; at most {most} are expected"
        )
    try:  # the header's columns by position: cells past them are dropped, as the grader's reading drops them
        frame = pd.read_csv(
            io.BytesIO(raw),
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            usecols=list(range(len(columns))),
        )
    except ValueError as exc:  # ParserError, UnicodeDecodeError (all text: nothing overflows)
        raise ArtefactError(
            f"{task.predictions} is not a readable CSV ({type(exc).__name__})"
        ) from exc
    # as pandas reads the header (it cuts a name at a NUL byte)
    if task.id_column not in frame.columns:
        raise ArtefactError(f"{task.predictions} has no column {task.id_column}")
    chosen = frame[task.id_column].map(id_key).isin(set(held.ids))
    return frame[~chosen].to_csv(index=False).encode("utf-8")


def write_submission(task: Task, held: Held | None, workspace: Path, folder: Path) -> Path | None:
    """The file to upload, at `folder`'s root: what a graded script wrote in `workspace`, the held rows'
    predictions taken out. None when the task has no predictions file or the script's cannot be read."""
    from dsagent_cbr.files import write_bytes_atomic
    from dsagent_cbr.harness.readers import read_bytes

    if not task.predictions:
        return None
    try:
        raw = read_bytes(workspace, task.predictions)
        data = test_rows_only(task, held, raw) if held else raw
    except ArtefactError:
        return None
    write_bytes_atomic(folder / task.predictions, data)
    return folder / task.predictions
