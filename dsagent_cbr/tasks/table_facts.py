"""What the search asks of a csv task's labelled rows before it drafts: whether a feature column holds free
text, and how many rows there are."""

from __future__ import annotations

from pathlib import Path

from dsagent_cbr.tasks.infer import free_text_columns
from dsagent_cbr.tasks.model import Task

FREE_TEXT_SAMPLE = 2000  # rows read to tell whether a column holds free text


def _train_file(task: Task) -> Path | None:
    if task.data_format == "npy" or not task.train_file:
        return None
    path = task.public_dir / task.train_file
    return path if path.is_file() else None


def free_text_in(task: Task) -> bool:
    """Whether the labelled rows have a free-text feature column (judged on their first rows)."""
    import pandas as pd

    path = _train_file(task)
    if path is None:
        return False
    frame = pd.read_csv(path, nrows=FREE_TEXT_SAMPLE)
    features = [c for c in frame.columns if c != task.id_column and c not in task.target]
    return bool(free_text_columns(frame, features))


def labelled_rows(task: Task) -> int:
    """The lines of the labelled file after its header (a quoted cell may hold more: an upper bound)."""
    path = _train_file(task)
    if path is None:
        return 0
    with path.open("rb") as lines:
        return max(
            0, sum(chunk.count(b"\n") for chunk in iter(lambda: lines.read(1 << 20), b"")) - 1
        )
