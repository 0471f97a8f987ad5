"""Grade the predictions a script wrote in its workspace (csv and npy tasks; a DS-Agent folder is graded by
its own submission.py: dsagent_grader.py): the test rows against the task's private answers, the
selection rows (plan.py) against the labels the harness held back. The file is an artefact like any
other a script leaves: read and parsed by readers.py, regular files only, its shape checked against
what the task expects before it is parsed."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dsagent_cbr.harness.plan import Held, found_at, id_keys
from dsagent_cbr.harness.readers import ArtefactError, read_bytes, read_csv, read_npy
from dsagent_cbr.tasks.model import Task

if TYPE_CHECKING:
    import pandas as pd

EXTRA_COLUMNS = 64  # a submission may carry columns the grader does not read, but not without bound
KEY = "__cbr_id_key"


class GradingError(ArtefactError):
    """The predictions are missing or malformed; the message says how, for the agent to act on."""


@dataclass(frozen=True)
class Grades:
    test: float | None  # None: the task has no test answers
    selection: float | None  # None: the task has no selection rows


def prediction_columns(task: Task) -> list[str]:
    """The columns of a csv task's predictions besides the id: a probability per class for log loss."""
    return list(task.classes) if task.metric.name == "logloss" else list(task.target)


def grade(task: Task, workspace: Path, held: Held | None = None) -> Grades:
    """The scores of the predictions in `workspace`: on the test rows (None for a task without answers,
    whose predictions then only have their form checked: a submission must be one a user can upload)
    and on the selection rows the harness appended to the test file."""
    assert task.predictions and task.data_format in ("csv", "npy")
    raw = read_bytes(workspace, task.predictions)
    try:
        if task.data_format == "npy":
            return _grade_npy(task, raw, held)
        return _grade_csv(task, raw, held)
    except (ValueError, TypeError, IndexError) as exc:
        raise GradingError(
            f"the predictions cannot be scored with {task.metric_name}: {exc}"
        ) from exc


def _check_finite(values: np.ndarray, what: str) -> None:
    if values.dtype.kind in "fc" and not np.all(np.isfinite(values)):
        raise GradingError(f"{what} contain NaN or infinite values")


def _grade_npy(task: Task, raw: bytes, held: Held | None) -> Grades:
    """Positional: the rows of X_test.npy in its order, put back as the test rows then the held rows."""
    assert task.predictions
    truth = np.load(task.private_dir / task.answers, allow_pickle=False) if task.answers else None
    example = truth if truth is not None else held.answers if held else None
    tested = held.test_rows if held else len(truth) if truth is not None else None
    expected = None if tested is None else tested + (held.rows if held else 0)
    limit = len(raw) if example is None or expected is None else expected * max(1, example[0].size)
    pred = read_npy(raw, task.predictions, max_items=limit)
    if pred.size == 0:
        raise GradingError(f"{task.predictions} is empty")
    if expected is not None and held and len(pred) != expected:
        raise GradingError(
            f"{task.predictions} has {len(pred)} rows, expected {expected} (one per row of X_test.npy)"
        )
    tested = len(pred) if tested is None else tested
    pred = held.unmix(pred) if held else pred
    test = score_npy(task, truth, pred[:tested], "test")
    selection = (
        score_npy(task, held.answers, pred[tested:], "selection") if held and held.rows else None
    )
    return Grades(test, selection)


def score_npy(task: Task, truth: np.ndarray | None, pred: np.ndarray, rows: str) -> float | None:
    if truth is not None and pred.shape != truth.shape:
        if pred.size == truth.size and pred.squeeze().shape == truth.squeeze().shape:
            pred = pred.reshape(truth.shape)
        else:
            raise GradingError(
                f"predictions of the {rows} rows have shape {pred.shape}, expected {truth.shape}"
            )
    if task.metric.name != "accuracy":
        try:
            pred = pred.astype(float)
        except ValueError as exc:
            raise GradingError(f"predictions are not numeric ({exc})") from exc
        _check_finite(pred, "predictions")
    return None if truth is None else task.metric.fn(truth, pred)


def _grade_csv(task: Task, raw: bytes, held: Held | None) -> Grades:
    import pandas as pd

    assert task.predictions and task.id_column
    if task.answers is not None:
        truth = pd.read_csv(task.private_dir / task.answers)
    elif task.test_file:  # no answers: the ids still have to be the test file's
        truth = pd.read_csv(task.public_dir / task.test_file, usecols=[task.id_column])
    else:
        raise GradingError(
            "the task names neither answers nor a test file to check the predictions against"
        )
    idc = task.id_column
    columns = prediction_columns(task)
    wanted = list(dict.fromkeys([idc, *columns]))
    expected = len(truth) + (held.rows if held else 0)
    sub = read_csv(
        raw,
        task.predictions,
        wanted=wanted,
        max_rows=expected,
        max_columns=len(wanted) + EXTRA_COLUMNS,
    )
    sub = sub[[idc, *columns]].assign(**{KEY: id_keys(sub[idc])})
    if sub[KEY].duplicated().any():
        raise GradingError(f"{task.predictions} repeats ids")
    chosen = sub[KEY].isin(set(held.ids)) if held else pd.Series(False, index=sub.index)
    tested = sub[~chosen]
    if held:  # the test rows by their own ids; an id the test file does not give matches no answer
        unknown = ("\0" + tested[KEY]).to_numpy(dtype=object)
        own = found_at(held.test_id_keys, held.test_places(tested[KEY]), unknown)
        tested = tested.assign(**{KEY: own})
    test = _score_csv(task, truth, tested, "test" if task.answers else None)
    selection = None
    if held and held.rows:
        # typed as an answers file is
        answers = pd.read_csv(io.StringIO(held.answers.to_csv(index=False)))
        selection = _score_csv(task, answers, sub[chosen], "selection")
    if len(sub) != expected:
        raise GradingError(
            f"{task.predictions} has {len(sub)} rows, expected {expected} (one per row of "
            f"{task.test_file or 'the test file'})"
        )
    return Grades(test, selection)


_TYPED: dict[tuple[int, Held, str], tuple[object, pd.DataFrame, bool]] = {}
TYPED_KEPT = 8


def typed_answers(held: Held, id_column: str) -> tuple[pd.DataFrame, bool]:
    """The selection rows' answers typed as an answers file is, and whether their ids are the held ids
    in order, read once: the bootstrap and the ensemble score hundreds of subsets of them (a csv round
    trip and an id check each took most of a score's time). Kept by the answers' identity (a Held with
    other answers compares equal) and holding them, so that an identity is never reused while kept."""
    import pandas as pd

    key = (id(held.answers), held, id_column)
    kept = _TYPED.get(key)
    if kept is None or kept[0] is not held.answers:
        answers = pd.read_csv(io.StringIO(held.answers.to_csv(index=False)))
        in_order = id_keys(answers[id_column]).tolist() == list(held.ids)
        if len(_TYPED) >= TYPED_KEPT:
            _TYPED.pop(next(iter(_TYPED)))
        kept = _TYPED[key] = (held.answers, answers, in_order)
    return kept[1], kept[2]


def score_selection(task: Task, held: Held, values: np.ndarray, rows: np.ndarray) -> float | None:
    """The score of predictions `values` for some of the selection rows (`rows`: their positions in
    `held`): what the search's ensemble chooses its weights on, most of the rows at a time."""
    import pandas as pd

    if task.data_format == "npy":
        return score_npy(task, held.answers[rows], values, "selection")
    idc = task.id_column
    assert idc is not None
    typed, in_order = typed_answers(held, idc)
    answers = typed.iloc[rows].reset_index(drop=True)
    if in_order:  # no merge (the ensemble scores hundreds)
        return _score_rows(task, answers, np.asarray(values).reshape(len(rows), -1))
    ids = [held.ids[r] for r in rows]
    sub = pd.DataFrame(values, columns=prediction_columns(task)).assign(**{KEY: ids})
    return _score_csv(task, answers, sub.assign(**{idc: sub[KEY]}), "selection")


def _score_csv(
    task: Task, truth: pd.DataFrame, sub: pd.DataFrame, rows: str | None
) -> float | None:
    """The score of `sub` against `truth` (id and target columns); with rows=None only the form of the
    predictions is checked, against the ids of `truth`."""
    idc = task.id_column
    assert idc is not None
    columns = prediction_columns(task)
    truth = truth.assign(**{KEY: id_keys(truth[idc])})
    merged = truth.merge(
        sub.drop(columns=[idc]), on=KEY, how="left", suffixes=("", "__pred"), indicator=True
    )
    absent = int((merged["_merge"] != "both").sum())
    if absent:
        raise GradingError(
            f"{task.predictions} has no prediction for {absent} of {len(truth)} "
            f"{rows or 'test'} ids"
        )
    pred_cols = [c if c not in truth.columns else f"{c}__pred" for c in columns]
    pred = merged[pred_cols].to_numpy()
    if rows is None:
        if task.metric.name != "accuracy":
            _numeric(pred)
        elif merged[pred_cols].isna().any().any():
            raise GradingError(f"{task.predictions} has empty predictions")
        return None
    return _score_rows(task, merged, pred)


def _score_rows(task: Task, truth: pd.DataFrame, pred: np.ndarray) -> float:
    """The metric of `pred` (one row per row of `truth`, one column per prediction column) against the
    target columns of `truth`."""
    if task.metric.name == "logloss":
        labels = truth[task.target[0]].astype(str).to_numpy()
        y = np.stack([(labels == c).astype(float) for c in task.classes], axis=1)
        return task.metric.fn(y, _numeric(pred))
    y = truth[list(task.target)].to_numpy()
    if task.metric.name == "auroc" and y.dtype.kind not in "biuf":
        y = _positive_indicator(task, y)
    if len(task.target) == 1:
        y, pred = y[:, 0], pred[:, 0]
    if task.metric.name != "accuracy":
        pred, y = _numeric(pred), y.astype(float)
    return task.metric.fn(y, pred)


_POSITIVE_WORDS = ("yes", "true", "1", "positive")


def _positive_indicator(task: Task, y: np.ndarray) -> np.ndarray:
    """AUROC answers given as labels: the positive class is classes[-1], or an unambiguous yes/true."""
    labels = {str(v) for v in np.unique(y.astype(str))}
    if task.classes:
        positive = task.classes[-1]
    else:
        matches = [w for w in _POSITIVE_WORDS if w in {lbl.lower() for lbl in labels}]
        if len(labels) != 2 or not matches:
            raise GradingError(
                "AUROC answers must be 0/1, or task.toml must give data.classes = [negative, positive]"
            )
        positive = next(lbl for lbl in labels if lbl.lower() == matches[0])
    return (y.astype(str) == positive).astype(float)


def predictions_by_id(
    task: Task, raw: bytes, order: list[str], max_rows: int
) -> pd.DataFrame | None:
    """A csv predictions file `raw` as the grader reads it: its id and prediction columns, indexed by id key;
    None when it holds an id twice or lacks one of `order` (the ids, as id_key gives them, wanted back)."""
    assert task.predictions and task.id_column
    columns = prediction_columns(task)
    try:
        frame = read_csv(
            raw,
            task.predictions,
            wanted=[task.id_column, *columns],
            max_rows=max_rows,
            max_columns=len(columns) + 1 + EXTRA_COLUMNS,
        )
    except ArtefactError:
        return None
    frame = frame.set_index(id_keys(frame[task.id_column]))
    if frame.index.duplicated().any() or not set(order) <= set(frame.index):
        return None
    return frame


def as_floats(values: np.ndarray) -> np.ndarray | None:
    """Predicted values as numbers, or None where they are not (the grader refuses those)."""
    try:
        return values.astype(float)
    # OverflowError: Python ints past a float's range
    except (TypeError, ValueError, OverflowError):
        return None


def _numeric(values: np.ndarray) -> np.ndarray:
    try:
        out = values.astype(float)
    # OverflowError: pandas keeps a column of -1 and 10**400 as Python ints, which no float holds
    except (TypeError, ValueError, OverflowError) as exc:
        raise GradingError(f"predictions are not numeric ({exc})") from exc
    _check_finite(out, "predictions")
    return out
