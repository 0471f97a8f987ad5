"""Which operator the search applies next, from what the tree holds. Pure: tested with plain values.

    draft      cbr's general solutions, first: the search never ends below a default boosted model
    ensemble   a blend of the best nodes' predictions, each time ENSEMBLE_EVERY more nodes have graded
               (and once more when the search ends: search.py)
then a move that asks the model and one that does not take turns while the model has time (model_share):
until one of its nodes has graded, its nodes may take MODEL_SHARE of the budget beyond its first
PLAIN_FIRST seconds, in all (a model too slow to write a script in that time is cut off there, and costs
the search no more); after, MODEL_SLACK seconds more than the other nodes have taken (a poor model costs at
most about half the time). Without a model (or after GIVE_UP model nodes in a row came to nothing) only
the second kind:
    debug      (model) fix the newest broken node, a chain of debug nodes at most --n-debug deep
    plan       (model) DS-Agent's step from a retrieved and reranked case, for the starter: PLANS of them
    improve    (model) the same step for one of the best nodes, with its log and what it printed
    transplant the next compatible past solution (nearest first), alternating with
    tune       new values for the model literals of one of the best families (Optuna)
    stop       when nothing is left to try (the budget and the node cap are the loop's)
With --parallel 1 a model node is written beside the plain nodes (it waits on the model, not on our
cores; its script waits for theirs): while it is, only plain moves start, and while a plain node runs,
only a model move may start beside it (`View.room`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Family:
    """A drafted or transplanted node and the tuned nodes grown from it."""

    root: int  # the node's iteration
    best: float | None  # the family's best score, None when nothing in it graded
    tunable: bool  # its model has literals the tune operator knows


@dataclass(frozen=True)
class View:
    """What the policy sees of the tree."""

    drafts_left: int  # general solutions for this kind of data not drafted yet
    cases_left: int
    families: list[Family]  # best first (graded ones before the rest)
    last: str  # the operator of the last node that did not ask the model, "" at the start
    can_ensemble: bool = False  # the task's predictions can be blended on the host, and 2+ nodes graded
    fresh: int = 0  # nodes graded since the last ensemble
    model: bool = False  # the model's operators are on: there is a model and it has not been given up
    plans: int = 0  # plan nodes so far
    graded: list[int] = field(default_factory=list)  # single-script nodes with a score, best first
    broken: list[int] = field(default_factory=list)  # nodes a debug node may fix, newest first
    last_by_model: bool = False  # the last node (ensembles aside) asked the model
    model_due: bool = True  # the model has time left (MODEL_SHARE, MODEL_SLACK)
    # the kind of node that may start now: any; plain (a model node is being written beside the plain ones);
    # model (the plain nodes' places are taken, one beside them is free)
    room: str = "any"


@dataclass(frozen=True)
class Move:
    operator: str  # draft | transplant | tune | ensemble | plan | improve | debug | stop
    parent: int | None = None  # tune: the family's root; improve, debug: the node it changes


ENSEMBLE_EVERY = 4
TUNE_THE_BEST = 0.7  # otherwise one of the next two, so that one lucky family or node does not take all
MODEL_OPERATORS = ("plan", "improve", "debug")
PLANS = 2  # plan nodes before the model improves nodes
GIVE_UP = 3  # model nodes in a row without a graded script: the search goes on without the model
MODEL_SHARE = 0.25  # of the budget beyond PLAIN_FIRST: the model's nodes in all, until one of them has graded
# seconds of any budget that are the plain moves' alone: a model's step (retrieve, rerank, plan, program) takes
# tens of seconds, which in a one-minute search cost more nodes than it can give (SmolLM2 on this
# machine with a quarter of a 1m budget: its plan node graded nothing on 7 of 7 deployment tasks, and
# took the place of 1 to 4 plain nodes)
PLAIN_FIRST = 60.0
MODEL_SLACK = 60.0  # seconds the model's nodes may run ahead of the others' once one has graded


def choose(view: View, rng: random.Random) -> Move:
    if view.room != "model":
        if view.drafts_left:
            return Move("draft")
        if view.can_ensemble and view.fresh >= ENSEMBLE_EVERY:
            return Move("ensemble")
    if view.room == "model" and not view.model_due:  # beside the plain nodes only while the model has time
        return Move("stop")
    moves = [model_move(view, rng) if view.room != "plain" else None,
             plain_move(view, rng) if view.room != "model" else None]
    if view.last_by_model or not view.model_due:
        moves.reverse()
    return next((m for m in moves if m is not None), Move("stop"))


def model_move(view: View, rng: random.Random) -> Move | None:
    if not view.model:
        return None
    if view.broken:
        return Move("debug", parent=view.broken[0])
    if view.plans < PLANS or not view.graded:
        return Move("plan")
    return Move("improve", parent=one_of_the_best(view.graded, rng))


def plain_move(view: View, rng: random.Random) -> Move | None:
    tunable = [f.root for f in view.families if f.tunable and f.best is not None]
    if view.cases_left and (view.last != "transplant" or not tunable):
        return Move("transplant")
    if tunable:
        return Move("tune", parent=one_of_the_best(tunable, rng))
    return None


def model_share(budget: float) -> float:
    """Seconds the model's nodes may take in all before one of them has graded."""
    return MODEL_SHARE * max(0.0, budget - PLAIN_FIRST)


def one_of_the_best(ranked: list[int], rng: random.Random) -> int:
    return ranked[0] if len(ranked) == 1 or rng.random() < TUNE_THE_BEST else rng.choice(ranked[1:3])
