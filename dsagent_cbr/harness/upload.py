"""What a user uploads: a script's predictions without its predictions of the selection rows (csv by id,
arrays by position), its rows back in the test file's order and with their own ids (mixing.py), every
other cell as the script wrote it."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dsagent_cbr.harness.grading import EXTRA_COLUMNS, prediction_columns, predictions_by_id
from dsagent_cbr.harness.plan import Held, found_at, id_key, id_keys
from dsagent_cbr.harness.readers import ArtefactError, csv_columns, read_npy
from dsagent_cbr.tasks.model import Task

if TYPE_CHECKING:
    import pandas as pd


def test_rows_only(task: Task, held: Held, raw: bytes) -> bytes:
    """The predictions file `raw` with the held rows' predictions taken out. It was graded, but it is
    parsed here as the untrusted file it is: one that does not parse is an ArtefactError."""
    assert task.predictions
    if task.data_format == "npy":
        buffer = io.BytesIO()
        array = read_npy(raw, task.predictions, max_items=len(raw))
        if len(array) != len(held.order or array):
            raise ArtefactError(f"{task.predictions} has {len(array)} rows, not one per test row")
        np.save(buffer, held.unmix(array)[: held.test_rows], allow_pickle=False)
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
    return _own_ids(frame, task.id_column, held).to_csv(index=False).encode("utf-8")


def _own_ids(frame: pd.DataFrame, idc: str, held: Held) -> pd.DataFrame:
    """The test rows of a workspace's predictions `frame`, by their own ids, in the test file's order (a
    row whose id no test row has keeps it, and goes last)."""
    keys = id_keys(frame[idc])
    frame = frame[~keys.isin(set(held.ids))]
    if not held.test_shown:
        return frame
    at = held.test_places(keys[frame.index])
    own = np.asarray(held.test_ids, dtype=object)
    frame = frame.assign(**{idc: found_at(own, at, frame[idc].to_numpy(dtype=object))})
    return frame.iloc[np.argsort(np.where(at >= 0, at, len(own)), kind="stable")]


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


def test_values(task: Task, held: Held, workspace: Path) -> np.ndarray | None:
    """A graded script's predictions of the test rows, one row each in the test file's order (a column per
    prediction column; labels as text): what a refit is compared on with its first fit. None when they
    cannot be read back as they were graded."""
    from dsagent_cbr.harness.dsagent_grader import PREDICTIONS
    from dsagent_cbr.harness.readers import read_bytes

    name = PREDICTIONS if task.dsagent is not None else task.predictions
    if not name:
        return None
    every = held.test_rows + held.rows
    try:
        raw = read_bytes(workspace, name)
        if task.dsagent is not None or task.data_format == "npy":
            values = read_npy(raw, name, max_items=len(raw))
            return held.unmix(values)[: held.test_rows] if len(values) == every else None
    except ArtefactError:
        return None
    frame = predictions_by_id(task, raw, [id_key(i) for i in held.test_shown], every)
    if frame is None:
        return None
    return frame.loc[[id_key(i) for i in held.test_shown], prediction_columns(task)].to_numpy()
