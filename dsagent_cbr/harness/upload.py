"""What a user uploads: a script's predictions without its predictions of the selection rows (csv by id,
arrays by position), every other cell as the script wrote it."""

from __future__ import annotations

import io

import numpy as np

from dsagent_cbr.harness.plan import Held, id_key
from dsagent_cbr.tasks.model import Task


def test_rows_only(task: Task, held: Held, raw: bytes) -> bytes:
    """The predictions file `raw` with the held rows' predictions taken out."""
    if task.data_format == "npy":
        buffer = io.BytesIO()
        np.save(buffer, np.load(io.BytesIO(raw), allow_pickle=False)[: held.test_rows], allow_pickle=False)
        return buffer.getvalue()
    import pandas as pd

    assert task.id_column
    frame = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, na_filter=False)
    chosen = frame[task.id_column].map(id_key).isin(set(held.ids))
    return frame[~chosen].to_csv(index=False).encode("utf-8")
