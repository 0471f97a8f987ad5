"""The search's tree as its operators, the model's moves and the policy's view read it: the nodes (the
run's rows), each node's script, what its run printed and left, and the questions asked of them. It runs
nothing and changes no row."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

from dsagent_cbr.agent.record import MODEL_OPERATORS, Operator, Row, asks_model
from dsagent_cbr.agent.run import Run
from dsagent_cbr.agent.rundir import row_workspace
from dsagent_cbr.clock import Clock
from dsagent_cbr.harness.result import RunResult
from dsagent_cbr.search import tuning
from dsagent_cbr.search.drafts import FLOOR_CASE
from dsagent_cbr.search.policy import (
    MIN_WEIGHT,
    Arm,
    Family,
    blend_seconds,
    blends_give_way,
    reserve,
)


class Tree:
    def __init__(self, run: Run) -> None:
        self.run = run
        # each node's run, for the model's improve and debug
        self.results: dict[int, RunResult] = {}
        self.refitted: set[int] = set()  # the nodes refit on every labelled row (search/refits.py)
        self.blend_rows = 0  # the rows each node of a blend predicts; none where nothing is blended

    @property
    def rows(self) -> list[Row]:
        return self.run.rows

    def row(self, iteration: int | None) -> Row:
        return next(r for r in self.rows if r.iteration == iteration)

    def script(self, row: Row) -> str:
        return (self.run.run_dir / row.script).read_text(encoding="utf-8") if row.script else ""

    def workspace(self, row: Row) -> Path:
        """What a node's script left, as the harness harvested it."""
        return row_workspace(self.run.run_dir, row.script)

    def maximize(self) -> bool:
        return self.run.task.direction == "maximize"

    def singles(self) -> list[Row]:
        """The graded nodes that are one script each (an ensemble's script only runs others)."""
        return [
            r
            for r in self.rows
            if r.operator != Operator.ENSEMBLE and r.score is not None and r.script
        ]

    def best_single(self) -> Row | None:
        """The best single-script node: what the bank retains."""
        best = max if self.maximize() else min
        return best(self.singles(), key=lambda r: r.score, default=None)  # singles are graded

    def floor(self) -> Row | None:
        """The graded draft of LightGBM's defaults (drafts.py's floor), if the search ran it."""
        drafted = (r for r in self.singles() if r.operator == Operator.DRAFT)  # not a tune grown from it
        return next((r for r in drafted if r.case == FLOOR_CASE), None)

    def graded(self) -> list[int]:
        """The single-script nodes with a score, best first."""
        # singles are graded: each has a score
        ranked = sorted(self.singles(), key=attrgetter("score"), reverse=self.maximize())
        return [r.iteration for r in ranked]

    def taken(self, operator: str, up_to: int | None = None) -> int:
        """How many drafts or transplants the search has made (the next takes the next general solution or
        the next nearest case), by node `up_to` when given."""
        return sum(
            r.operator == operator for r in self.rows if up_to is None or r.iteration <= up_to
        )

    def fresh(self) -> int:
        """Nodes graded since the last ensemble."""
        rows = self.rows
        since = next(
            (i for i in range(len(rows) - 1, -1, -1) if rows[i].operator == Operator.ENSEMBLE), -1
        )
        return sum(r.score is not None for r in rows[since + 1 :])

    def families(self) -> list[Family]:
        """Each node that is not a tune, with the tuned nodes grown from it: best first, ungraded last."""
        rows, maximize = self.rows, self.maximize()
        found = []
        for root in (
            r for r in rows if r.operator not in (Operator.TUNE, Operator.ENSEMBLE) and r.script
        ):
            grown = [r for r in rows if r is root or tuned_from(r, root)]
            scores = [r.score for r in grown if r.score is not None]
            best = (max if maximize else min)(scores, default=None)
            found.append(Family(root.iteration, best, _tunable(self.script(root), len(grown))))
        graded = sorted(
            (f for f in found if f.best is not None), key=lambda f: f.best, reverse=maximize
        )
        return graded + [f for f in found if f.best is None]

    def broken(self, depth: int) -> list[int]:
        """Nodes whose script ran and failed, not debugged yet, at the end of a chain of fewer than `depth`
        debug nodes: newest first."""
        rows = {r.iteration: r for r in self.rows}
        debugged = {r.parent for r in rows.values() if r.operator == Operator.DEBUG}

        def chain(row: Row) -> int:
            return (
                1 + chain(rows[row.parent])
                if row.operator == Operator.DEBUG and row.parent in rows
                else 0
            )

        return [
            r.iteration
            for r in reversed(rows.values())
            if r.iteration in self.results
            and not self.results[r.iteration].ok
            and r.operator != Operator.TUNE
            and r.iteration not in debugged
            and chain(r) < depth
        ]

    def leading(self, row: Row | None = None) -> list[Row]:
        """The nodes whose refits the search makes for the submission of `row` (the run's best, by
        default) while it goes on: the row itself, or the members of a blend that weigh MIN_WEIGHT or
        more, the heaviest first."""
        return [node for node, weight in self.made_of(row) if weight >= MIN_WEIGHT]

    def made_of(self, row: Row | None = None) -> list[tuple[Row, float]]:
        """The nodes the submission of `row` (the run's best, by default) is made from, with their
        weights, the heaviest first: the row itself, or every member of a blend."""
        row = self.run.best if row is None else row
        if row is None:
            return []
        if row.operator != Operator.ENSEMBLE:
            return [(row, 1.0)] if row.script else []
        weights = sorted((row.members or {}).items(), key=lambda kv: -kv[1])
        return [(self.row(i), w) for i, w in weights]

    def reserve(self, clock: Clock) -> float:
        """Seconds of what the `clock` has left kept for the run's end (policy.reserve): the refit of the
        heaviest leading node not refit yet, when the run refits and it fits; before the blends to come
        when one node leads."""
        seconds, blend = self._refit_waiting(), self.blends_to_come(searching=True)
        return reserve(seconds, clock.left(), blend, refit_first=self._one_node_leads())

    def blends_give_way(self, clock: Clock) -> bool:
        """One node leads, and its refit fits in what the `clock` has left only if the blends to come do
        not run (policy.blends_give_way)."""
        seconds, blend = self._refit_waiting(), self.blends_to_come(searching=True)
        return self._one_node_leads() and blends_give_way(seconds, clock.left(), blend)

    def _refit_waiting(self) -> float | None:
        """The first fit's seconds of the heaviest leading node not refit yet; None without one, or
        when the run does not refit."""
        waiting = [r for r in self.leading() if r.iteration not in self.refitted]
        return waiting[0].wall_time if self.run.wants_refit and waiting else None

    def _one_node_leads(self) -> bool:
        return self.run.best is not None and self.run.best.operator != Operator.ENSEMBLE

    def blends_to_come(self, searching: bool, blended: bool = True) -> float:
        """The seconds of the blends at the run's end: the last blend while the search goes on, and
        with a refit the blend of its members' refits, which reads as many predictions again (on five
        million rows that blend and the ending took 17 s), unless the submission is one node's (not
        `blended`)."""
        refit_blend = self.run.wants_refit and blended
        return self.blend_seconds() * (int(searching) + int(refit_blend))

    def blend_seconds(self) -> float:
        """What the search's last blend will take (policy.blend_seconds), with one node more than have
        graded: the one that may end before it."""
        if not self.blend_rows:
            return 0.0
        blends = [
            r.ended - r.started
            for r in self.rows
            if r.operator == Operator.ENSEMBLE and r.ended is not None and r.started is not None
        ]
        return blend_seconds(self.blend_rows, len(self.singles()) + 1, max(blends, default=0.0))

    def arms(self, now: float) -> tuple[Arm, Arm]:
        """(the plain moves' arm, the model's), for the policy: each node's own time (so far, while it
        runs), and the improvements of the best score so far it made, in the order the nodes ended. Drafts
        are in neither arm's rate, but their times are plain nodes' times."""
        sign = 1.0 if self.maximize() else -1.0
        plain = Tally()
        model = Tally()
        best = None
        for r in sorted(self.rows, key=lambda r: r.ended if r.ended is not None else now):
            timed = (
                model
                if asks_model(r.operator)
                else plain
                if r.operator != Operator.ENSEMBLE
                else None
            )
            # a draft's time tells a plain node's too
            if timed is not None and r.started is not None:
                timed.took(
                    (r.ended if r.ended is not None else now) - r.started,
                    r.ended is not None,
                    charged=r.operator != Operator.DRAFT,
                )
            tally = model if asks_model(r.operator) else plain if r.operator in ARMED else None
            if r.score is not None and (best is None or sign * (r.score - best) > 0):
                if tally is not None and best is not None:
                    tally.gain += sign * (r.score - best)
                best = r.score
        last = next(
            (
                asks_model(r.operator)
                for r in reversed(self.rows)
                if r.operator in (*ARMED, *MODEL_OPERATORS)
            ),
            None,
        )
        return plain.arm(last is False), model.arm(last is True)


@dataclass
class Tally:
    seconds: float = 0.0
    gain: float = 0.0
    times: list[float] = field(default_factory=list)

    def took(self, seconds: float, ended: bool, charged: bool = True) -> None:
        """A node's time: charged to the arm's rate, and kept as one of its kind's times once it ended."""
        self.seconds += seconds if charged else 0.0
        if ended:
            self.times.append(seconds)

    def arm(self, last: bool) -> Arm:
        return Arm(self.seconds, self.gain, tuple(self.times), last)


# the plain arm's operators; drafts and ensembles are in neither
ARMED = (Operator.TRANSPLANT, Operator.TUNE)


def _tunable(script: str, tried: int) -> bool:
    """The script's model has literals the tune operator knows, and values of them not yet tried (the
    root and each tune of it tried one set)."""
    found = tuning.knobs(script)
    return bool(found) and tried < tuning.space_size(found)


def tuned_from(row: Row, root: Row) -> bool:
    return row.operator == Operator.TUNE and row.parent == root.iteration
