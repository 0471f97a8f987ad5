"""Which operator the search applies next, from what the tree holds. Pure: tested with plain values.

    draft      cbr's general solution, first: the search never ends below a default boosted model
    transplant the next compatible past solution (nearest first), alternating with
    tune       new values for the model literals of one of the best families (Optuna)
    ensemble   a blend of the best nodes' predictions, each time ENSEMBLE_EVERY more nodes have graded
               (and once more when the search ends: search.py)
    stop       when nothing is left to try (the budget and the node cap are the loop's)
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """A drafted or transplanted node and the tuned nodes grown from it."""

    root: int  # the node's iteration
    best: float | None  # the family's best score, None when nothing in it graded
    tunable: bool  # its model has literals the tune operator knows


@dataclass(frozen=True)
class View:
    """What the policy sees of the tree."""

    can_draft: bool  # a general solution exists for this kind of data and was not drafted yet
    cases_left: int
    families: list[Family]  # best first (graded ones before the rest)
    last: str  # the operator of the last node, "" at the start
    can_ensemble: bool = False  # the task's predictions can be blended on the host, and 2+ nodes graded
    fresh: int = 0  # nodes graded since the last ensemble


@dataclass(frozen=True)
class Move:
    operator: str  # draft | transplant | tune | ensemble | stop
    parent: int | None = None  # tune: the family's root


ENSEMBLE_EVERY = 4
TUNE_THE_BEST = 0.7  # otherwise one of the next two families, so that one lucky family does not take all


def choose(view: View, rng: random.Random) -> Move:
    tunable = [f for f in view.families if f.tunable and f.best is not None]
    if view.can_draft:
        return Move("draft")
    if view.can_ensemble and view.fresh >= ENSEMBLE_EVERY:
        return Move("ensemble")
    if view.cases_left and (view.last != "transplant" or not tunable):
        return Move("transplant")
    if tunable:
        family = tunable[0] if len(tunable) == 1 or rng.random() < TUNE_THE_BEST else rng.choice(tunable[1:3])
        return Move("tune", parent=family.root)
    return Move("stop")
