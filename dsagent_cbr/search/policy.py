"""The search's policy, all of it: which operator comes next and whether a node may start now. Pure: it
sees the tree as plain values (View) and is tested with them.

    draft      cbr's general solutions, first: the search never ends below a default boosted model
    ensemble   a blend of the best nodes' predictions, each time ENSEMBLE_EVERY more nodes have graded
               (and once more when the search ends: loop.py)
then one of two arms, each a kind of move:
    plain      the next compatible past solution (transplant, nearest first), alternating with new values
               for the model literals of one of the best families (tune, Optuna)
    model      fix the newest broken node (debug, a chain at most --n-debug deep); the nearest past
               solution adapted in one call, as cbr deploy does (adapt, once, the model's first node: so a
               search is never worse than a deploy); a new solution from a retrieved case (plan, PLANS of
               them); a change to one of the best nodes (improve)
chosen by gain per second: each arm's improvements of the best score so far, over the seconds its nodes
took, both with a prior (PRIOR_SECONDS, and the mean improvement seen) so that an arm not tried yet is
tried. A model that is fast and good gets more of the budget; one that is slow or writes nothing that
grades gets less, and none once its nodes no longer fit in what is left. On a tie the arms take turns.

Time: the budget is the command's wall clock. Its end is kept for the refit of the selected node and the
run's last steps (`reserve`); no node starts with less of the rest left than a node of its arm needs: a
model's node MIN_MODEL_SECONDS, or the median time the model's nodes took when that is longer (its first
FIRST_MODEL_NODE); a plain node MIN_PLAIN_SECONDS, or ROOM times the median its kind took (drafts count),
but a draft MIN_PLAIN_SECONDS, and any only FIRST_GRADE_SECONDS while no node has graded. A draft of a
learner there for the blend's variety runs for EXTRA_SHARE of the budget at most (operators.py).
Each node is charged its own time, from its start to its end (loop.py stamps both).

Unless --in-turn, the model's nodes are written beside the plain nodes (they wait on the model, not on our
cores), in places of their own (`View.room`): the model is asked whenever one of its places is free and
its node fits in what is left, so that it thinks while the machine runs scripts. Its gain per second
then weighs nothing against the plain moves': it costs them no place. With --in-turn its nodes take
the plain nodes' places, and the two arms' rates decide who takes each."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field

from dsagent_cbr.agent.record import Operator
from dsagent_cbr.clock import MIN_NODE_SECONDS
from dsagent_cbr.harness.run import limit_to_train

ENSEMBLE_EVERY = 4
# otherwise one of the next two, so that one lucky family or node does not take all
TUNE_THE_BEST = 0.7
PLANS = 2  # plan nodes before the model improves nodes
# a model's node starts with no less of the budget left than this, or the median time its nodes took
MIN_MODEL_SECONDS = MIN_NODE_SECONDS
# a model node's time before one has ended: a capable model's plan and program calls take tens of seconds,
# and SmolLM2 on this machine took 40-140 s; a one-minute search has no room for one after its drafts
FIRST_MODEL_NODE = 60.0
# a plain node (a draft, transplant or tune, whose time is a script's) starts with no less than this left,
# or ROOM times the median its kind took: scripts of seconds still run in a 30-second budget, and a booster
# the deadline stops keeps its rounds (untrusted/bootstrap.py)
MIN_PLAIN_SECONDS = 10.0
# while no node has graded, a plain node starts with this left: a short run's one graded node is its
# submission (a 15-second budget on a table of 1,030 rows had 8 s for nodes after the starter and stopped
# with none)
FIRST_GRADE_SECONDS = 3.0
ROOM = 1.5
# the forest's and CatBoost's drafts (drafts.EXTRAS) run for at most this share of the budget, and keep
# what they learned by then: on diamonds-cut (43,000 rows, five classes) CatBoost's draft
# took 120 s of a five-minute run, still learning, and weighed 0.05 in the blend; the run tuned nothing
EXTRA_SHARE = 0.2
PRIOR_SECONDS = 60.0  # each arm's rate starts as if it had spent this long for one typical gain
TIE = 0.02  # rates this close are a tie: a few milliseconds either way decide nothing
# kept at the budget's end: the refit of the selected node learns from every labelled row, about 1.6 times the
# rows its first fit learned (80% of the 80% the selection rows leave), so it takes longer than that fit
REFIT_ROOM = 1.5
ENDING = 5.0  # seconds for the bank's retain and the record
# the last blend reads every graded node's predictions back, then writes and grades its own: 3.3 s a node
# and 5 s besides for a million predicted rows (a table of five million on this idle two-core machine)
BLEND_ROW_SECONDS = 5e-6
BLEND_MEMBER_ROW_SECONDS = 3.3e-6
# a blend's members weighing less are refit only at the search's end, where time allows (refits.py)
MIN_WEIGHT = 0.1
# the seconds a budget spends before its first node: the interpreter, the task and the bank, then
# the starter's run (a run of credit's 3,340 rows reached its first node 4.2 s in, on this idle
# two-core machine; more under load)
STARTUP = 7.0
# the smallest budget the search can honour: its start, a first node and the run's end. A 12-second
# budget graded one node of credit here, a 10-second one none (a run that trains nothing)
MIN_BUDGET = STARTUP + FIRST_GRADE_SECONDS + ENDING


@dataclass(frozen=True)
class Family:
    """A drafted or transplanted node and the tuned nodes grown from it."""

    root: int  # the node's iteration
    best: float | None  # the family's best score, None when nothing in it graded
    tunable: bool  # its model has literals the tune operator knows, with values not yet tried


@dataclass(frozen=True)
class Arm:
    """What one kind of move has done so far (drafts and ensembles are in neither arm)."""

    seconds: float = 0.0  # its nodes' time, those in flight so far
    # the improvements of the best score so far its nodes made (positive is better)
    gain: float = 0.0
    times: tuple[float, ...] = ()  # its ended nodes' times
    last: bool = False  # the last node of either arm was this arm's

    def rate(self, prior_gain: float) -> float:
        return (self.gain + prior_gain) / (self.seconds + PRIOR_SECONDS)


@dataclass(frozen=True)
class View:
    """What the policy sees of the tree."""

    drafts_left: int  # general solutions for this kind of data not drafted yet
    cases_left: int
    families: list[Family]  # best first (graded ones before the rest)
    last: str  # the operator of the last plain node, "" at the start
    # the task's predictions can be blended on the host, and 2+ nodes graded
    can_ensemble: bool = False
    fresh: int = 0  # nodes graded since the last ensemble
    model: bool = False  # there is a model
    adapted: bool = False  # the model's adapt node is taken
    plans: int = 0  # plan nodes so far
    graded: list[int] = field(default_factory=list)  # single-script nodes with a score, best first
    broken: list[int] = field(default_factory=list)  # nodes a debug node may fix, newest first
    plain: Arm = Arm()
    by_model: Arm = Arm()
    left: float = math.inf  # seconds of the budget left
    # the kind of node that may start now: any (the two kinds share the places); plain or model (each
    # kind has places of its own, and one of this kind is free)
    room: str = "any"

    def prior_gain(self) -> float:
        """The typical improvement: what an arm is credited with before it has shown its own."""
        gains = [a.gain for a in (self.plain, self.by_model) if a.gain > 0]
        return statistics.mean(gains) if gains else 1.0


@dataclass(frozen=True)
class Move:
    operator: str  # an Operator, or "stop"
    parent: int | None = None  # tune: the family's root; improve, debug: the node it changes


def needs(arm: Arm, by_model: bool = False) -> float:
    """The seconds of the budget a node of this arm needs left to start."""
    if by_model:
        return (
            max(MIN_MODEL_SECONDS, statistics.median(arm.times)) if arm.times else FIRST_MODEL_NODE
        )
    return (
        max(MIN_PLAIN_SECONDS, ROOM * statistics.median(arm.times))
        if arm.times
        else MIN_PLAIN_SECONDS
    )


def reserve(
    refit_seconds: float | None,
    left: float = math.inf,
    blend: float = 0.0,
    refit_first: bool = False,
) -> float:
    """Seconds of the budget kept for the run's end: the refit of the selected node (refit_room; none
    without a refit), the last blend's `blend` seconds and the ending. Nodes start and run within the
    rest. A refit that no longer fits in the `left` seconds will be skipped, so its room goes to nodes
    (a 2-minute run on diamonds-cut kept 67 s for a refit it then skipped, and stopped with 53 s left).
    With `refit_first` (one node leads), a refit that fits only without the blends keeps its room, and
    the blends give way (blends_give_way)."""
    end = ENDING + blend
    if refit_seconds is None:
        return end
    refit = refit_room(refit_seconds)
    if refit_first and blends_give_way(refit_seconds, left, blend):
        return ENDING + refit
    return end + (refit if end + refit <= left else 0.0)


def blends_give_way(refit_seconds: float | None, left: float, blend: float) -> bool:
    """The leading node's refit fits in the `left` seconds, but not beside the blends still to come
    (`blend` seconds): the refit goes first, as no new node nor blend starts. A leader learned from every
    labelled row is the submission the run promises; a blend of first fits is not. On military-gender at
    one minute the blends' 9 s went to a third draft and a last blend, and the floor's refit (LightGBM's
    defaults on every row) was skipped with 8 s left."""
    if refit_seconds is None:
        return False
    room = refit_room(refit_seconds)
    return ENDING + room <= left < ENDING + blend + room


def refit_room(first_fit: float) -> float:
    """The time kept for the refit of a node whose first fit took `first_fit` seconds: REFIT_ROOM times
    it, and no less than the limit the refit at the run's end asks for, whose deadline for training must
    leave it the first fit's time (agent/run_refit.py). Below that the room was kept and the refit then
    refused: a one-minute run on 1.4 million rows kept 9 s for the 6-second refit of LightGBM's defaults,
    whose deadline would have left it 5 s, and ended with 19 s unused and the first fit submitted."""
    return max(REFIT_ROOM * first_fit, limit_to_train(first_fit))


def blend_seconds(rows: int, members: int, taken: float = 0.0) -> float:
    """What a blend of `members` nodes, each predicting `rows` rows, will take: at least the longest a
    blend of this run took (`taken`: the machine's load is in it). A few thousand rows take
    milliseconds; a five-million-row table's last blend took 16 s and ran its run past the budget."""
    return max(taken, rows * (BLEND_ROW_SECONDS + members * BLEND_MEMBER_ROW_SECONDS))


def budget_too_short(budget: float) -> str | None:
    """Why a search cannot honour `budget` seconds, in a sentence that names one it can; None when
    it can."""
    if budget >= MIN_BUDGET:
        return None
    return (
        f"A budget of {budget:g}s is too short to train anything: the run's start, the starter "
        f"and a first model need {MIN_BUDGET:g}s; give {MIN_BUDGET:g}s or more (a minute lets the "
        "search tune and blend)."
    )


def plain_needs(view: View) -> float:
    """What a plain node needs left to start: less while nothing has graded, as any graded node is a
    submission the run would otherwise end without. A draft needs no more than MIN_PLAIN_SECONDS: the
    drafts' learners stop at their deadline and keep what they learned, and their times differ too much
    for the first one's to tell the next's (a one-minute run on hotel-rates stopped with 24 s left after
    a 13 s LightGBM, where LightGBM's defaults took 3 s)."""
    if not view.graded:
        return FIRST_GRADE_SECONDS
    return MIN_PLAIN_SECONDS if view.drafts_left else needs(view.plain)


def out_of_time(view: View) -> bool:
    """No node of any arm fits in what is left (the loop then stops with the budget spent)."""
    return view.left < min(
        plain_needs(view), needs(view.by_model, True) if view.model else math.inf
    )


def choose(view: View, rng: random.Random) -> Move:
    plain_fits = view.room != "model" and view.left >= plain_needs(view)
    if plain_fits and view.drafts_left:
        return Move(Operator.DRAFT)
    if view.room != "model" and view.can_ensemble and view.fresh >= ENSEMBLE_EVERY:
        return Move(Operator.ENSEMBLE)  # seconds on the host: no script, no time asked
    model = (
        model_move(view, rng)
        if view.room != "plain" and view.left >= needs(view.by_model, True)
        else None
    )
    plain = plain_move(view, rng) if plain_fits else None
    if model is not None and plain is not None:  # one place for either kind: the better rate takes it
        return model if model_first(view) else plain
    return model or plain or Move("stop")


def model_first(view: View) -> bool:
    """The model's arm has the better gain per second; on a tie, the arm that did not move last."""
    prior = view.prior_gain()
    model, plain = view.by_model.rate(prior), view.plain.rate(prior)
    if math.isclose(model, plain, rel_tol=TIE):
        return not view.by_model.last
    return model > plain


def model_move(view: View, rng: random.Random) -> Move | None:
    if not view.model:
        return None
    if view.broken:
        return Move(Operator.DEBUG, parent=view.broken[0])
    if not view.adapted:
        return Move(Operator.ADAPT)
    if view.plans < PLANS or not view.graded:
        return Move(Operator.PLAN)
    return Move(Operator.IMPROVE, parent=one_of_the_best(view.graded, rng))


def plain_move(view: View, rng: random.Random) -> Move | None:
    tunable = [f.root for f in view.families if f.tunable and f.best is not None]
    if view.cases_left and (view.last != Operator.TRANSPLANT or not tunable):
        return Move(Operator.TRANSPLANT)
    if tunable:
        return Move(Operator.TUNE, parent=one_of_the_best(tunable, rng))
    return None


def one_of_the_best(ranked: list[int], rng: random.Random) -> int:
    return (
        ranked[0] if len(ranked) == 1 or rng.random() < TUNE_THE_BEST else rng.choice(ranked[1:3])
    )
