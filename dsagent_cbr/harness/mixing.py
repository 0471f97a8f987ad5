"""Where held rows hide among the test rows, and the way back. A script gets the held rows' features in
the test file; nothing there may tell it which rows they are, or it reads their labels off their
neighbours (the ids missing from a training file sorted by its label, or the last rows of the test
file, gave selection accuracy 1.0 to a script that looked at no feature).

So, unless the task declares a time order:
- the test file's rows, held ones included, come in a keyed random order (plan.py's key);
- every row's id is drawn from one pool, the test ids and the held rows' own ids, by a keyed random
  bijection: an id says nothing of the row that carries it, which may be a test row or a held one.
Files that list or describe rows by id follow the same order and the same renaming. With a time order
(a time column, or forecasting) the held rows are the latest labelled rows, which their times give away
anyway: they keep their ids and follow the test rows, and the rest of the order stays.

Arrays in cbr's memory are in the *source* order: the test rows as the task's files hold them, then the
held rows in the plan's order. The files a script sees and writes are in the *workspace* order."""

from __future__ import annotations

import numpy as np

MIX_STREAM = 1  # selection_key.task_seed's stream for these draws (0 chooses the rows)


def draw_order(
    test_rows: int, held_rows: int, in_time: bool, rng: np.random.Generator
) -> tuple[int, ...]:
    """The workspace's rows of the test file, each as its source row: a test row below `test_rows`, a held
    row from there on."""
    every = np.arange(test_rows + held_rows)
    return tuple(map(int, every if in_time else rng.permutation(every)))


def pooled_ids(
    test_ids: list[str], held_ids: list[str], in_time: bool, rng: np.random.Generator
) -> tuple[list[str], list[str]]:
    """The id each test row and each held row carries in the workspace: their own with a time order, else
    the pool of both dealt out at random."""
    pool = [*test_ids, *held_ids]
    if not in_time:
        pool = [pool[k] for k in rng.permutation(len(pool))]
    return pool[: len(test_ids)], pool[len(test_ids) :]


def mix(values: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    """Rows in the source order, put in the workspace's."""
    return values[list(order)] if order else values


def unmix(values: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    """Rows in the workspace's order, put back in the source order."""
    return values[np.argsort(order)] if order else values


def without_held(order: tuple[int, ...], test_rows: int) -> tuple[int, ...]:
    """The workspace order of a file that lists the test rows only (a refit's), where the first fit saw
    them."""
    return tuple(k for k in order if k < test_rows)
