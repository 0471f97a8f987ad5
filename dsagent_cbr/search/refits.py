"""The search's refits, planned from the start rather than left to the budget's last seconds. A refit is
the node's script once more on every labelled row (agent/refit.py judges it against its first fit). A run
that kept it for the end lost it whenever the end came short: on a 20k-row table a one-minute run
submitted its first fit (RMSE 4.056) where the refit of the same script scored 3.847, and at five
minutes a blend's refit needed all its members' fits again and was skipped on 6 of 11 tables.

So the nodes that lead are refit while the search goes on, one at a time, in a node's place:

    leading      the run's best node, or the members of the best blend that weigh MIN_WEIGHT or more,
                 the heaviest first (tree.leading); then the floor, which the final choice may take
    when         once the drafts are done (the leaders before them seldom last), or at once when what is
                 left of the budget would not hold the leader's refit much later (LATE)
    which fit    a refit whose boosting its deadline cut to less than half its first fit's rounds
                 (refit.cut_short), or that fell too far from its first fit, is not used: the first
                 fit stands in for it

At the end what time allows is refit late, a blend's lighter members too. The selected node's submission
is its refit; a blend's is the blend of its members' refits where they are ready and their first fits
where not, which the record names. Each node is refit once, across resumes."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from dsagent_cbr.agent import refit
from dsagent_cbr.agent.record import Operator, Refit, Row
from dsagent_cbr.agent.rundir import publish_outputs
from dsagent_cbr.errors import Cancelled
from dsagent_cbr.harness.plan import Held, hold_out
from dsagent_cbr.harness.readers import ArtefactError, read_fit_rounds, read_refit_rounds
from dsagent_cbr.harness.run import REFIT_VARIABLE
from dsagent_cbr.search import ensemble
from dsagent_cbr.search.operators import Operators
from dsagent_cbr.search.policy import REFIT_ROOM, reserve

LATE = 3.0  # refit the leader before the drafts are done when less than this many of its refits are left


@dataclass(frozen=True)
class NodeRefit:
    """One node's refit: its record (agent/record.py's Refit) and where it left its predictions."""

    record: Refit
    workspace: Path | None = None

    @property
    def used(self) -> bool:
        return self.record.status == "ok"


class Refits:
    def __init__(self, operators: Operators) -> None:
        self.operators = operators
        self.tree = operators.tree
        self.run = operators.run
        self.clock = operators.clock
        self.done: dict[int, NodeRefit] = {}
        self.running: set[int] = set()
        self._lock = threading.Lock()
        held = hold_out(self.run.task)
        self.held: Held | None = held if self.run.wants_refit else None

    # -- while the search goes on --------------------------------------------------------------------
    def next(self) -> Row | None:
        """The leading node to refit now, or None; it is marked as running."""
        if self.held is None:
            return None
        drafted = self.tree.taken(Operator.DRAFT) >= len(self.operators.general)
        with self._lock:
            for node in self._candidates(drafted):
                if node.iteration in self.done or node.iteration in self.running:
                    continue
                # the room policy.reserve keeps: a deadline that leaves the refit its first fit's time,
                # as at the run's end (_late_refit_fits). Asked for REFIT_ROOM times it, a five-minute run
                # on flights-late skipped the refit of a blend's main member and stopped with 38 s left
                took = node.wall_time or 0.0
                if not self._fits(node, took):
                    continue
                if drafted or self.clock.left() < LATE * REFIT_ROOM * took:
                    self.running.add(node.iteration)
                    return node
        return None

    def _candidates(self, drafted: bool) -> list[Row]:
        """The leading nodes, then, once the drafts are done, the floor (LightGBM's defaults) while no
        blend has scored better: the final choice takes it over the last blend when its own selection
        score is better (submitted_choice), which only the last blend can tell. In both five-minute runs
        of military-gender it was so taken, with 11 and 17 s left for its 10-s refit, and its first fit,
        learnt from 80% of the rows, was submitted in place of LightGBM's defaults on all of them."""
        floor = self.tree.floor() if drafted else None
        leading = self.tree.leading()
        if floor is None or floor in leading or self._blend_beats(floor):
            return leading
        return [*leading, floor]

    def _blend_beats(self, node: Row) -> bool:
        better = self.run.task.metric.better
        blends = (r for r in self.tree.rows if r.operator == Operator.ENSEMBLE)
        return any(better(r.score, node.score) for r in blends if r.score is not None)

    def _fits(self, node: Row, need: float, searching: bool = True, blended: bool = True) -> bool:
        """The node's script reads the refit's variable, and `need` seconds of training fit before the
        refit's deadline (at 5M rows one started with 55 s for a first fit of 33 s, and its deadline
        cut it short). `searching`: the search's last blend is still to come; `blended`: the blend of
        the refits may be."""
        keep = self.end(searching, blended)
        late = self.run.too_late_to_refit(need, f"node {node.iteration}'s first fit", keep)
        return late is None and REFIT_VARIABLE in self.tree.script(node)

    def end(self, searching: bool, blended: bool = True) -> float:
        """What a refit leaves of the budget: the ending and the blends still to come, the search's last
        one while `searching` (a refit that ran to the budget's end took the run past it), and the blend
        of the refits unless the submission is known to be one node's (not `blended`)."""
        return reserve(None, blend=self.tree.blends_to_come(searching, blended))

    def refit(self, node: Row, searching: bool = True, blended: bool = True) -> None:
        """Refit `node` (in the node pool while `searching`, or late, after the last blend, before the
        blend of the refits if `blended`) and keep how it went; a refit the run's stop cancelled leaves
        nothing."""
        try:
            made = self._refit(node, searching, blended)
        except Cancelled:
            return
        finally:
            with self._lock:
                self.running.discard(node.iteration)
        with self._lock:
            self.done[node.iteration] = made
            self.tree.refitted.add(node.iteration)

    def _refit(self, node: Row, searching: bool, blended: bool) -> NodeRefit:
        run, t = self.run, node.iteration
        code = self.tree.script(node)
        folder = run.run_dir / "refit" / f"node-{t:02d}"
        run.progress.update(
            note=f"the refit: node {t}'s script again on every labelled row "
            f"(its first fit took {node.wall_time or 0:.0f} s)"
        )
        with self.operators.cores.turn():  # scripts that take turns take this one's too
            run.open_for(t, halted=True)
            limit = self.clock.limit(self.end(searching, blended))
            first = self.tree.workspace(node)
            result = run.execute(
                t,
                0,
                code,
                refit=True,
                folder=folder,
                timeout=limit,
                cancel=run.halt,
                first_fit=read_fit_rounds(first),
            )
        if not result.ok:
            return NodeRefit(Refit(status=result.status, error=result.error))
        workspace = Path(result.workspace)
        rounds = read_refit_rounds(workspace)
        if refit.cut_short(result.wall_time, limit, rounds):
            return NodeRefit(refit.cut(result.test_metric, rounds))
        judged = run.judged_refit(first, workspace, result.test_metric, rounds)
        return NodeRefit(judged, workspace)

    # -- at the end ----------------------------------------------------------------------------------
    def submit(self, row: Row) -> Refit:
        """The selected row's submission from what was refit (its own refit, or its blend's members'),
        after refitting late what still fits the budget; published when any refit is used."""
        blended = row.operator == Operator.ENSEMBLE  # else no blend of refits is to come
        # every member, the light ones too: the submission learns from every labelled row where it can
        for node, _ in self.tree.made_of(row):
            if self._late_refit_fits(node, blended):
                self.refit(node, searching=False, blended=blended)
        if row.operator != Operator.ENSEMBLE:
            return self._single(row)
        return self._blend(row)

    def _late_refit_fits(self, node: Row, blended: bool) -> bool:
        return (
            self.held is not None
            and node.iteration not in self.done
            and self._fits(node, node.wall_time or 0.0, searching=False, blended=blended)
        )

    def _single(self, row: Row) -> Refit:
        made = self.done.get(row.iteration)
        if made is None and REFIT_VARIABLE not in self.tree.script(row):
            return Refit(
                status="skipped", why=f"the selected script does not read {REFIT_VARIABLE}"
            )
        if made is None:
            left = max(self.clock.left(), 0)
            why = f"{left:.0f} s of the budget left, and the first fit took {row.wall_time or 0:.0f} s"
            return Refit(status="skipped", why=why)
        if made.used and made.workspace is not None and self.held is not None:
            code = self.tree.script(row)
            view = self.held.for_refit()
            publish_outputs(self.run.run_dir, self.run.task, code, made.workspace, view)
        return made.record

    def _blend(self, row: Row) -> Refit:
        """The blend's members' refits where used, their first fits where not, blended with its weights.
        The record names the members submitted as first fits: `cbr predict` runs the blend as it was."""
        assert row.members is not None and self.held is not None
        task, held, view = self.run.task, self.held, self.held.for_refit()
        members, first_fits, parts = [], [], []
        for node in (self.tree.row(i) for i in row.members):
            refitted = self._used_refit(node)
            code, workspace = self.tree.script(node), refitted or self.tree.workspace(node)
            member = ensemble.fitted(task, held, node.iteration, code, workspace, bool(refitted))
            if member is None:
                return Refit(status="failed", error=f"member node {node.iteration}'s predictions")
            members.append(member)
            first_fits += [] if refitted else [node.iteration]
            how = "refit" if refitted else "first fit"
            parts.append(f"node {node.iteration} ({row.members[node.iteration]:g}) {how}")
        refit_weight = sum(w for i, w in row.members.items() if i not in first_fits)
        if refit_weight == 0:
            return Refit(
                status="skipped",
                why="no member of the blend was refit in time",
                agreement="; ".join(parts),
            )
        workspace = self.run.run_dir / "refit" / "exec" / "workspace"
        try:
            grades = ensemble.refit(
                task, view, ensemble.row_ids(task, view), members, row.members, workspace
            )
        except ArtefactError as exc:
            return Refit(status="failed", error=f"the refit members' blend: {exc}")
        publish_outputs(self.run.run_dir, task, self.tree.script(row), workspace, view)
        return Refit(
            status="ok",
            why=refit.REFIT_NOTE,
            agreement="; ".join(parts),
            test_after_refit=grades.test,
            share=round(refit_weight / sum(row.members.values()), 3),
            first_fits=first_fits,
        )

    def _used_refit(self, node: Row) -> Path | None:
        """Where the node's refit left its predictions, when the submission may take them."""
        made = self.done.get(node.iteration)
        return made.workspace if made is not None and made.used else None
