"""The search's *ensemble*: a blend of graded nodes' predictions, made on the host from what each node
wrote, and judged on rows that did not choose it.

Every graded node predicted the selection rows beside the test rows. The selection rows are split in
folds (seeded): two, or FEW_FOLDS where the rows are few. For each fold, greedy forward selection with
replacement (Caruana et al., 2004) picks members and weights on the other folds' rows, from the nodes
best there; the fold's rows are then predicted with those weights. The ensemble's selection score is
graded on these cross-fitted predictions, so no row judges weights it chose, and the score is on the
same rows as a single node's. The test rows take the mean of the folds' weights. The node's script
(untrusted/blend.py) runs its members and blends them with those weights: what a user re-runs is what
was graded.

Labels (accuracy) are blended by the members' class probabilities where every member wrote them (an
adapted case's shim does), so that a sure member outweighs unsure ones; otherwise by a weighted vote.
The probabilities are the node's output like its labels: read through the bounded readers, and used
only where their best classes are the labels it submitted (else their rows may not be the submission's).

A single node's selection score is the best of many on the rows that chose it, so it overstates how
the node does on new rows; the blend's does not. To choose between them on equal terms, the procedure
"take the best single node" is cross-fitted on the same folds (the best node on the other folds' rows
predicts each fold) and graded beside the blend: `Blend.single`. A node lucky on all the selection rows
is the best on every fold too, so the single node is taken only where it beats the blend beyond the
rows' noise: `Blend.single_sure`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np

from dsagent_cbr.files import write_bytes_atomic
from dsagent_cbr.harness.grading import (
    Grades,
    as_floats,
    grade,
    prediction_columns,
    predictions_by_id,
    score_selection,
)
from dsagent_cbr.harness.plan import Held, keys_of
from dsagent_cbr.harness.readers import (
    ArtefactError,
    FitRounds,
    csv_columns,
    read_bytes,
    read_csv,
    read_fit_rounds,
    read_npy,
)
from dsagent_cbr.harness.uncertainty import Sample
from dsagent_cbr.tasks.model import Task
from dsagent_cbr.untrusted.blend import blend

ROUNDS = 10  # greedy steps: the weights are multiples of 1/ROUNDS
POOL = 8  # candidates for each fold: each family's best node on the rows that choose, then the next best
FEWEST_ROWS = 40  # selection rows below which the folds are too small to choose weights on
# fewer selection rows than FEW_ROWS are cut in FEW_FOLDS folds: replayed on the last blends of eleven such
# runs, the final choice scored better on test in ten, each fold's weights resting on more rows
# (docs/decisions/blend-folds.md)
FEW_ROWS, FEW_FOLDS = 5_000, 5
MAX_CLASSES = 1000  # class-probability columns read back
# share of rows whose best-scored class must be the submitted label for scores to be used
SCORES_AGREE = 0.9


@dataclass(frozen=True)
class Member:
    iteration: int
    code: str
    values: np.ndarray  # the test rows then the selection rows, in one order for every member
    # accuracy: class probabilities in the same rows, when the node wrote them
    scores: np.ndarray | None = None
    classes: tuple[str, ...] = ()  # the scores' columns
    # the rounds its boosters kept, for a re-run of the blend to refit it as the search did
    first_fit: FitRounds | None = None


def possible(task: Task, held: Held | None) -> bool:
    """The grader reads csv and npy predictions on the host; a DS-Agent folder's grader is its own script."""
    return (
        held is not None
        and held.rows >= FEWEST_ROWS
        and bool(task.predictions)
        and task.data_format in ("csv", "npy")
    )


def row_ids(task: Task, held: Held) -> list[str]:
    """The ids of the rows every member predicts, as the workspace's files write them: the test rows',
    then the selection rows'; none for npy predictions (their rows are in place)."""
    if task.data_format != "csv":
        return []
    return [*held.test_shown, *held.shown_ids]


def load(
    task: Task, held: Held, ids: list[str], iteration: int, workspace: Path, code: str
) -> Member | None:
    """A graded node's predictions as an array in the source order (`ids`, from row_ids; by position for
    npy predictions, as many as `held` lays out); None when they cannot be read back as they were graded (a node that wrote
    them oddly is left out, not guessed at)."""
    member = _predictions(task, held, ids, iteration, workspace, code)
    return None if member is None else replace(member, first_fit=read_fit_rounds(workspace))


def fitted(
    task: Task, held: Held, iteration: int, code: str, workspace: Path, refit: bool
) -> Member | None:
    """A member's test-row predictions, as a submission takes them: its refit's (given every labelled
    row, it predicted the test rows alone) or its first fit's test rows (beside the selection rows)."""
    view = held.for_refit() if refit else held
    member = load(task, view, row_ids(task, view), iteration, workspace, code)
    if member is None or refit:
        return member
    scores = None if member.scores is None else member.scores[: held.test_rows]
    return Member(iteration, code, member.values[: held.test_rows], scores, member.classes)


def _predictions(
    task: Task, held: Held, ids: list[str], iteration: int, workspace: Path, code: str
) -> Member | None:
    assert task.predictions
    try:
        raw = read_bytes(workspace, task.predictions)
        if task.data_format == "npy":
            values = read_npy(raw, task.predictions, max_items=len(raw))
            rows = held.test_rows + held.rows
            return Member(iteration, code, held.unmix(values)) if len(values) == rows else None
    except ArtefactError:
        return None
    columns, order = prediction_columns(task), keys_of(ids)
    frame = predictions_by_id(task, raw, order, len(order))
    if frame is None:
        return None
    values = frame.loc[order, columns].to_numpy()
    if task.metric.name != "accuracy":
        numbers = as_floats(values)
        return None if numbers is None else Member(iteration, code, numbers)
    scores, classes = class_scores(workspace, frame, columns)
    return Member(
        iteration,
        code,
        values,
        None if scores is None else scores[frame.index.get_indexer(order)],
        classes,
    )


def class_scores(
    workspace: Path, frame, columns: list[str]
) -> tuple[np.ndarray | None, tuple[str, ...]]:
    """The class probabilities an adapted node wrote beside its labels (untrusted/adapter_shim.py), in the rows of
    its predictions `frame`; none when it wrote none, they do not parse as probabilities, or their best
    classes disagree with its labels (then the rows may not be the submission's)."""
    from dsagent_cbr.untrusted.adapter_shim import CBR_CLASS_SCORES

    if len(columns) != 1:
        return None, ()
    try:
        raw = read_bytes(workspace, CBR_CLASS_SCORES)
        header = csv_columns(raw, CBR_CLASS_SCORES)
        # a class named twice
        if not 2 <= len(header) <= MAX_CLASSES or len(set(header)) < len(header):
            return None, ()
        scores = read_csv(
            raw, CBR_CLASS_SCORES, wanted=header, max_rows=len(frame), max_columns=len(header)
        ).to_numpy(dtype=float)
    # cells that are not numbers (as floats)
    except (ArtefactError, TypeError, ValueError, OverflowError):
        return None, ()
    labels = frame[columns[0]].astype(str).to_numpy()
    if (
        len(scores) != len(frame)
        or not np.isfinite(scores).all()
        or (scores < 0).any()
        or (scores.sum(axis=1) <= 0).any()
    ):
        return None, ()
    # each member's rows weigh alike in the mean
    scores = scores / scores.sum(axis=1, keepdims=True)
    if np.mean(np.asarray(header)[scores.argmax(axis=1)] == labels) < SCORES_AGREE:
        return None, ()
    return scores, tuple(header)


@dataclass(frozen=True)
class Blend:
    weights: dict[int, float]  # member iteration -> weight, the folds' mean
    folds: list[dict[int, float]]  # each fold's weights, chosen on the other folds' rows
    grades: Grades  # the selection score graded on cross-fitted predictions
    # the selection score of taking the best single node, cross-fitted on the same folds
    single: float | None
    # that score beats the blend's beyond the selection rows' noise (a paired bootstrap)
    single_sure: bool


def make(
    task: Task,
    held: Held,
    ids: list[str],
    members: list[Member],
    seed: int,
    workspace: Path,
    families: dict[int, int] | None = None,
) -> Blend:
    """Choose weights for each fold on the other folds' rows, write the blended predictions (rows `ids`)
    into `workspace` and grade them. `families`: each member's family (the node its tunes grew from), by
    iteration."""
    vote = task.metric.name == "accuracy"
    folds = split(held.rows, seed, fold_count(held.rows))
    choosers = [np.setdiff1d(np.arange(held.rows), rows) for rows in folds]
    alone = [
        [
            _score(task, held, members, np.eye(len(members))[i], rows, vote)
            for i in range(len(members))
        ]
        for rows in choosers
    ]  # each member's score on the rows that choose each fold's weights
    kin = [(families or {}).get(m.iteration, m.iteration) for m in members]
    chosen = [
        _greedy(task, held, members, rows, vote, _pool(scores, task.direction, kin))
        for rows, scores in zip(choosers, alone, strict=True)
    ]
    firsts = [np.eye(len(members))[_order(scores, task.direction)[0]] for scores in alone]
    taken = _cross_fitted(members, held, folds, firsts, vote)
    blended = _cross_fitted(members, held, folds, chosen, vote)
    mean = sum(chosen) / len(chosen)
    test = combine(members, mean, np.arange(held.test_rows), vote)
    _write(task, held, ids, np.concatenate([test, blended]), workspace)
    return Blend(
        _named(members, mean),
        [_named(members, w) for w in chosen],
        grade(task, workspace, held),
        score_selection(task, held, taken, np.arange(held.rows)),
        beyond_noise(task, held, seed, taken, blended),
    )


def beyond_noise(task: Task, held: Held, seed: int, single: np.ndarray, blend: np.ndarray) -> bool:
    """The selection rows' predictions `single` score better than `blend`'s, and the interval of their
    paired difference over a bootstrap of the rows excludes zero (harness/uncertainty.py). Drawn only
    where the first holds: hundreds of scorings."""
    every = np.arange(held.rows)
    ahead = task.metric.better(
        score_selection(task, held, single, every), score_selection(task, held, blend, every)
    )
    return bool(ahead) and Sample.of(task, held, seed).told_apart(single, blend)


def _cross_fitted(
    members: list[Member],
    held: Held,
    folds: list[np.ndarray],
    weights: list[np.ndarray],
    vote: bool,
) -> np.ndarray:
    """The selection rows' predictions, each fold blended with the weights the other folds chose."""
    judged = [
        combine(members, w, held.test_rows + rows, vote)
        for rows, w in zip(folds, weights, strict=True)
    ]
    return np.concatenate(judged)[np.argsort(np.concatenate(folds))]


def combine(members: list[Member], weights: np.ndarray, rows: np.ndarray, vote: bool) -> np.ndarray:
    """The members' blend in `rows` (positions in their arrays). Labels are voted on, unless every member
    wrote class probabilities for the same classes: then the class with the highest weighted mean
    probability, which also counts how sure each member is (untrusted/blend.py's blend)."""
    used = np.flatnonzero(weights)
    members, weights = [members[i] for i in used], np.asarray(weights)[used]
    scores = (
        [m.scores[rows] for m in members if m.scores is not None] if soft(members, vote) else None
    )
    return blend([m.values[rows] for m in members], weights, vote, scores, members[0].classes)


def soft(members: list[Member], vote: bool) -> bool:
    """The members' labels blend by their class probabilities: two or more members, each of which wrote
    probabilities for the same classes."""
    return (
        vote
        and len(members) > 1
        and all(m.scores is not None and m.classes == members[0].classes for m in members)
    )


def split(rows: int, seed: int, folds: int = 2) -> list[np.ndarray]:
    """The selection rows in `folds` parts, as positions."""
    return np.array_split(np.random.default_rng(seed).permutation(rows), folds)


def fold_count(rows: int) -> int:
    """Folds for `rows` selection rows: more where they are few, so that each fold's weights are chosen
    on more of them."""
    return FEW_FOLDS if rows < FEW_ROWS else 2


def _named(members: list[Member], weights: np.ndarray) -> dict[int, float]:
    return {m.iteration: round(float(w), 3) for m, w in zip(members, weights, strict=True) if w > 0}


def _score(
    task: Task, held: Held, members: list[Member], weights: np.ndarray, rows: np.ndarray, vote: bool
) -> float | None:
    """The blend with `weights` (over `members`) scored on the selection rows `rows`."""
    return score_selection(task, held, combine(members, weights, held.test_rows + rows, vote), rows)


def _pool(alone: list[float | None], direction: str, families: list[int]) -> list[int]:
    """The members the greedy selection picks among: each family's best alone, then the next best, POOL in
    all. By score alone, twenty tunes of one logistic model filled a five-minute run's pool on a text
    table and pushed out the naive Bayes draft, whose blend with a past solution had scored best (cross-
    fitted AUROC 0.871 against 0.866 after; 0.847 against 0.837 on the test rows)."""
    ranked, seen, firsts = _order(alone, direction), set(), []
    for i in ranked:
        if families[i] not in seen:
            seen.add(families[i])
            firsts.append(i)
    return [*firsts, *(i for i in ranked if i not in firsts)][:POOL]


def _greedy(
    task: Task,
    held: Held,
    members: list[Member],
    rows: np.ndarray,
    vote: bool,
    pool: list[int],
) -> np.ndarray:
    """Caruana's forward selection with replacement on `rows`, among the members `pool`: ROUNDS times,
    add the member whose extra share makes the blend score best. Returns the weights (summing to one)
    over `members`."""
    better = task.metric.better
    counts = np.zeros(len(members))
    for _ in range(ROUNDS):
        trials = {
            i: _score(task, held, members, counts + np.eye(len(members))[i], rows, vote)
            for i in pool
        }
        pick = next(iter(trials))
        for i, value in trials.items():
            pick = i if better(value, trials[pick]) else pick
        counts[pick] += 1
    return counts / counts.sum()


def _order(scores: list[float | None], direction: str) -> list[int]:
    """Positions best first, unscored last."""
    return sorted(range(len(scores)), key=lambda i: _rank(scores[i], direction))


def _rank(score: float | None, direction: str) -> float:
    if score is None:
        return np.inf
    return -score if direction == "maximize" else score


def refit(
    task: Task,
    view: Held,
    ids: list[str],
    members: list[Member],
    weights: dict[int, float],
    workspace: Path,
) -> Grades:
    """--refit of a blend: its members, refit on every labelled row, predicted the test rows alone
    (`members`, rows `ids`, or by position for npy; `view` is the held rows' for_refit); their blend
    with the weights the search chose is written into `workspace` as the task's predictions and graded:
    its test score is only reported."""
    rows = np.arange(view.test_rows)
    weighted = np.array([weights[m.iteration] for m in members])
    vote = task.metric.name == "accuracy"
    _write(task, view, ids, combine(members, weighted, rows, vote), workspace)
    return grade(task, workspace, view)


def _write(task: Task, held: Held, ids: list[str], values: np.ndarray, workspace: Path) -> None:
    """The blend (rows in the source order) as the task's predictions file, in the workspace's order:
    what the grader and the submission read."""
    import io

    assert task.predictions
    workspace.mkdir(parents=True, exist_ok=True)
    if task.data_format == "npy":
        buffer = io.BytesIO()
        np.save(buffer, held.mix(values), allow_pickle=False)
        write_bytes_atomic(workspace / task.predictions, buffer.getvalue())
        return
    import pandas as pd

    frame = pd.DataFrame(values, columns=prediction_columns(task))
    frame.insert(0, task.id_column, ids)
    write_bytes_atomic(workspace / task.predictions, frame.to_csv(index=False).encode("utf-8"))


def script(task: Task, members: list[Member], weights: dict[int, float]) -> str:
    """untrusted/blend.py with its plan, its members and the bootstrap that runs each of them filled in."""
    used = [m for m in members if m.iteration in weights]
    vote = task.metric.name == "accuracy"
    plan = {
        "predictions": task.predictions,
        "id": task.id_column,
        "columns": prediction_columns(task) if task.data_format == "csv" else [],
        "vote": vote,
        "weights": [weights[m.iteration] for m in used],
        "classes": list(used[0].classes) if soft(used, vote) else None,
        "first_fits": [m.first_fit for m in used],
    }
    untrusted = resources.files("dsagent_cbr.untrusted")
    text = untrusted.joinpath("blend.py").read_text(encoding="utf-8")
    bootstrap = untrusted.joinpath("bootstrap.py").read_text(encoding="utf-8")
    text = text.replace('BOOTSTRAP = ""', f"BOOTSTRAP = {bootstrap!r}", 1)
    text = text.replace(
        'PLAN = {"predictions": "submission.csv", "id": None, "columns": [], "vote": False, '
        '"weights": [], "classes": None}',
        f"PLAN = {plan!r}",
        1,
    )
    return text.replace("MEMBERS = []", "MEMBERS = " + repr([m.code for m in used]), 1)
