"""How sure a selection score is. The selection rows are a sample: a score on 200 of them moves with which
200 they happen to be. A bootstrap over the rows (RESAMPLES draws with replacement, the same draws for
every script it compares) gives a score's interval, and says whether two scripts can be told apart: the
interval of their paired difference holds zero or not. Each script's predictions are read back from what
it wrote, through the readers, as the grader read them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dsagent_cbr.harness.grading import (
    as_floats,
    prediction_columns,
    predictions_by_id,
    score_selection,
)
from dsagent_cbr.harness.plan import Held
from dsagent_cbr.harness.readers import ArtefactError, read_bytes, read_npy
from dsagent_cbr.tasks.model import Task

RESAMPLES = 200
LEVEL = 0.9  # the share of the bootstrap's scores an interval holds
# Each draw takes at most this many rows: on flights-late's 10,000 selection rows the interval and the
# runner-up's test (600 draws) took 5.0 s with draws of every row, 2.5 s with draws of 2,000. A draw of
# m of the n rows varies sqrt(n / m) times as much as one of all n, so its scores' spread around their
# median is narrowed by sqrt(m / n) and centred on the score of all the rows (the m-out-of-n bootstrap;
# Bickel, Goetze and van Zwet, 1997).
DRAW_ROWS = 2000


@dataclass(frozen=True)
class Sample:
    """The selection rows as one bootstrap sees them: the task, where the rows are, and the draws."""

    task: Task
    held: Held
    draws: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, task: Task, held: Held, seed: int = 0) -> Sample:
        rng = np.random.default_rng(seed)
        size = min(held.rows, DRAW_ROWS)
        return cls(task, held, tuple(rng.integers(0, held.rows, size) for _ in range(RESAMPLES)))

    def scores(self, values: np.ndarray) -> np.ndarray:
        """The score of the selection rows' predictions `values` on each draw (NaN where it has none),
        as if the draw held all the rows."""
        found = [score_selection(self.task, self.held, values[d], d) for d in self.draws]
        scores = np.array([np.nan if s is None else s for s in found], dtype=float)
        narrowing = np.sqrt(len(self.draws[0]) / self.held.rows)
        if narrowing == 1.0 or not np.isfinite(scores).any():
            return scores  # draws of all the rows: the plain bootstrap
        every = np.arange(self.held.rows)
        whole = score_selection(self.task, self.held, values, every)
        return (np.nan if whole is None else whole) + (scores - np.nanmedian(scores)) * narrowing

    def interval(self, values: np.ndarray) -> tuple[float, float] | None:
        return _bounds(self.scores(values))

    def told_apart(self, one: np.ndarray, other: np.ndarray) -> bool:
        """The two scripts' scores differ on these rows: their paired difference's interval excludes zero."""
        bounds = _bounds(self.scores(one) - self.scores(other))
        return bounds is not None and (bounds[0] > 0 or bounds[1] < 0)


def _bounds(scores: np.ndarray) -> tuple[float, float] | None:
    scores = scores[np.isfinite(scores)]
    if len(scores) < RESAMPLES // 2:
        return None
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(scores, [tail, 100 - tail])
    return float(low), float(high)


def selection_values(task: Task, held: Held, workspace: Path) -> np.ndarray | None:
    """A graded script's predictions of the selection rows, in the held rows' order; None when they cannot
    be read back as they were graded."""
    if not task.predictions:
        return None
    try:
        raw = read_bytes(workspace, task.predictions)
        if task.data_format == "npy":
            values = read_npy(raw, task.predictions, max_items=len(raw))
            every = held.test_rows + held.rows
            return held.unmix(values)[held.test_rows :] if len(values) == every else None
    except ArtefactError:
        return None
    frame = predictions_by_id(task, raw, list(held.ids), held.test_rows + held.rows)
    if frame is None:
        return None
    values = frame.loc[list(held.ids), prediction_columns(task)].to_numpy()
    # labels, as the files write them
    return values if task.metric.name == "accuracy" else as_floats(values)
