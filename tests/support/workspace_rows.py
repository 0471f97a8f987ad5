"""The right answers as a script's predictions file names its rows: the test rows and the held rows by the
ids the workspace gives them (harness/mixing.py), for fakes that write a node's predictions."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from dsagent_cbr.harness.plan import Held, hold_out, id_key
from dsagent_cbr.tasks.model import Task


def workspace_answers(task: Task, held: Held, refit: bool = False) -> pd.DataFrame:
    """The test rows' answers, then the held rows' (none for a refit), each by its workspace id."""
    test = pd.read_csv(task.private_dir / task.answers)
    shown = {id_key(own): ours for own, ours in zip(held.test_ids, held.test_shown, strict=True)}
    test[task.id_column] = test[task.id_column].map(id_key).map(shown)
    if refit:
        return test
    labels = held.answers.astype({c: test[c].dtype for c in task.target})
    return pd.concat([test, labels], ignore_index=True)


def noisy_answers(task: Task) -> Callable[[str, Path], None]:
    """Predictions a fake node writes (a regression task's): the answers with noise of its own, seeded by
    its code; a refit (its folder under refit/) predicts the test rows alone, with less noise."""
    held = hold_out(task)
    assert held is not None

    def write(code: str, workspace: Path) -> None:
        rng = np.random.default_rng(zlib.crc32(code.encode()))
        refit = "refit" in workspace.parts
        rows = workspace_answers(task, held, refit)
        target = task.target[0]
        noisy = rows.assign(**{target: rows[target] + rng.normal(0, 2 if refit else 5, len(rows))})
        noisy.to_csv(workspace / task.predictions, index=False)

    return write
