"""The search's operators that need no model, each making one node on the tree (tree.py) and running its
script in the sandbox within what is left of the budget:

    draft       the nth of cbr's general solutions, fitted to the task by the structural adapter
    transplant  the nth nearest compatible past solution, adapted the same way
    tune        a family root's script with Optuna's next values for its model literals
    ensemble    a blend of the graded nodes' predictions, judged on rows that did not choose it
                (ensemble.py); on the host, in seconds

The refits of the nodes that lead are refits.py's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from dsagent_cbr.adapter import Adapted, adapt_case
from dsagent_cbr.agent.develop import DevelopConfig
from dsagent_cbr.agent.record import Operator, Row, Status
from dsagent_cbr.agent.rundir import step_dir
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.clock import Clock
from dsagent_cbr.files import write_text_atomic
from dsagent_cbr.harness.plan import hold_out
from dsagent_cbr.harness.readers import ArtefactError, read_fit_rounds
from dsagent_cbr.harness.result import RunResult
from dsagent_cbr.sandbox.scratch import clear_folder
from dsagent_cbr.search import ensemble, tuning
from dsagent_cbr.search.drafts import (
    FLOOR_CASE,
    GENERAL,
    QUICK_CASE,
    deep_next,
    general_cases,
    in_order,
    is_extra,
)
from dsagent_cbr.search.parallel import Turns
from dsagent_cbr.search.policy import EXTRA_SHARE
from dsagent_cbr.search.tree import Tree, tuned_from


class Operators:
    def __init__(
        self,
        tree: Tree,
        cases: Callable[[], list[Case]],
        clock: Clock,
        config: DevelopConfig,
        *,
        scripts_take_turns: bool = False,
    ) -> None:
        self.tree = tree
        self.run = tree.run
        self.clock = clock
        self.config = config
        self._retrieve = cases
        self._cases: list[Case] | None = None
        self._retrieving = threading.Lock()
        self.general = general_cases(self.run.task)  # drafted first, in this order (or deep_next's)
        self._drafting = threading.Lock()
        self._picked = 0  # the drafts made so far took the first this many of self.general
        held = hold_out(self.run.task)
        self.held = held if ensemble.possible(self.run.task, held) else None
        # the model's nodes written beside the plain ones (--parallel 1) run their scripts in turn with theirs
        self.cores = Turns(scripts_take_turns)

    def execute(
        self, t: int, code: str, *, first: bool = False, most: float | None = None
    ) -> RunResult:
        """Node t's script, run within what is left of the budget, and within `most` seconds if given;
        killed if the run stops meanwhile. `first`: a model node's, which goes before the plain scripts
        waiting for the cores."""
        with self.cores.turn(first):  # the limit is worked out once the script has the cores
            self.run.open_for(t, halted=True)
            limit = self.clock.limit(self.tree.reserve(self.clock))
            limit = limit if most is None or limit is None else min(limit, most)
            result = self.run.execute(t, 0, code, timeout=limit, cancel=self.run.halt)
            self.tree.results[t] = result
        return result

    @property
    def cases(self) -> list[Case]:
        """Past solutions to transplant, nearest first: retrieved when first asked for (by the loop or
        by a node's thread)."""
        with self._retrieving:
            if self._cases is None:
                self._cases = self._retrieve()
            return self._cases

    def make(self, row: Row) -> None:
        """Node `row` by its plain operator: the nth draft takes the nth general solution, the nth
        transplant the nth nearest case."""
        if row.operator == Operator.TUNE:
            self.tune(row)
        elif row.operator == Operator.ENSEMBLE:
            self.ensemble(row)
        elif row.operator == Operator.DRAFT:
            case = self._draft(row)
            budget = self.clock.budget
            extra = is_extra(case) and budget is not None
            self.transplant(row, case, most=EXTRA_SHARE * budget if extra else None)
        else:
            self.transplant(row, self.cases[self.tree.taken(row.operator, row.iteration) - 1])

    def _draft(self, row: Row) -> Case:
        """The general solution node `row` drafts: the nth draft takes the nth."""
        index = self.tree.taken(Operator.DRAFT, row.iteration) - 1
        with self._drafting:
            self._picked = max(self._picked, index + 1)
            return self.general[index]

    def _deepen(self, t: int, workspace: str | None, quick: bool) -> None:
        """The deep draft next, among those not yet taken, when the rounds the 31-leaf or the `quick`
        draft (node t) kept ask for larger trees (drafts.deep_next); on a resume, as the journal
        recorded it. The rounds are the script's own account: they may set the drafts' order, never a
        score."""
        with self._drafting:

            def order() -> list[str] | None:
                rounds = read_fit_rounds(Path(workspace)) if workspace else None
                calls = rounds["calls"] if rounds else []
                moved = deep_next(self.general, self._picked, calls, quick)
                return None if moved is None else [c.task_name for c in moved]

            names = self.run.journal.step(t, "drafts", order)
            if names:
                self.general = in_order(self.general, names)

    def transplant(self, row: Row, case: Case, most: float | None = None) -> None:
        """Draft or transplant: a case fitted to the task by the structural adapter, then run (within
        `most` seconds, if given)."""
        run, t = self.run, row.iteration
        row.case = case.task_name or case.id
        row.step = f"{row.operator} {row.case}"
        run.say(t, "adapt")
        adapted: Adapted = run.journal.step(t, "adapt", lambda: adapt_case(case, run.task))
        if "error" in adapted:
            row.status, row.error = Status.NOT_ADAPTABLE, adapted["error"]
            return
        result = self.execute(t, adapted["code"], most=most)
        notes = "; ".join(adapted["notes"]) or "same task type"
        row.log = f"Adapted {row.case} ({notes}): {result.feedback().splitlines()[0]}"
        run.consider(row, adapted["code"], result)
        if row.case == FLOOR_CASE and result.ok:
            run.floor = result.score
        if row.operator == Operator.DRAFT and row.case in (GENERAL, QUICK_CASE) and result.ok:
            self._deepen(t, result.workspace, quick=row.case == QUICK_CASE)

    def tune(self, row: Row) -> None:
        """The family root's script with Optuna's next values for its model literals."""
        run, t = self.run, row.iteration
        root = self.tree.row(row.parent)
        row.case = root.case
        code = self.tree.script(root)
        found = tuning.knobs(code)
        tunes = [r for r in run.rows if tuned_from(r, root) and r.tuned is not None]  # not this one yet
        # a tune still running has no score yet, nor a failure: its values are only not proposed again
        tried = [({k.name: k.value for k in found}, root.score)]
        tried += [(r.tuned or {}, r.score) for r in tunes if r.status != Status.NOT_RUN]
        running = [r.tuned or {} for r in tunes if r.status == Status.NOT_RUN]
        run.say(t, "tune")
        warm = tuning.warm_values(found, [c.script for c in self.cases])
        seed = self.config.seed + t
        row.tuned = run.journal.step(
            t,
            "tune",
            lambda: tuning.propose(found, tried, warm, run.task.direction, seed, running),
        )
        row.step = "tune " + ", ".join(f"{k}={v:.3g}" for k, v in row.tuned.items())
        code = tuning.with_values(code, found, row.tuned)
        result = self.execute(t, code)
        row.log = f"Tuned node {root.iteration}'s model: {result.feedback().splitlines()[0]}"
        run.consider(row, code, result)

    def ensemble(self, row: Row) -> None:
        """A blend of the graded single-script nodes (ensemble.py says how it is judged)."""
        run, t = self.run, row.iteration
        run.say(t, "ensemble")
        folder = step_dir(run.run_dir, t)
        made = run.journal.step(t, "ensemble", lambda: self.blend(folder))
        if "error" in made:
            row.status, row.error = Status.NOT_BLENDED, str(made["error"])
            return
        mean, *folds = (
            {int(k): v for k, v in w.items()}
            # "halves": what a run journaled before the folds
            for w in (made["weights"], *made.get("folds", made.get("halves", [])))
        )
        row.members = mean
        row.step = "ensemble of " + ", ".join(f"node {k} ({w:g})" for k, w in mean.items())
        row.log = (
            f"Blended {len(mean)} node(s): the selection rows in {len(folds)} folds, each graded with "
            f"weights chosen on the others' rows ({'; '.join(map(str, folds))}); the best single node "
            f"on the others' rows, graded on each fold, scores {made.get('single')}"
            + ("; better than the blend beyond the rows' noise" if made.get("single_sure") else "")
        )
        try:
            result = RunResult.from_dict(made.get("result"))
        except ValueError as exc:  # a replayed record someone edited
            raise run.journal.damaged(t, "ensemble", exc) from None
        run.consider(row, (folder / "script.py").read_text(encoding="utf-8"), result)

    def blend(self, folder: Path) -> dict[str, object]:
        """The single-script nodes' predictions, read back and blended (once across resumes)."""
        task = self.run.task
        held = self.held
        started = time.monotonic()
        assert held is not None
        workspace = folder / "exec" / "workspace"
        clear_folder(folder / "exec")
        ids = ensemble.row_ids(task, held)
        members = [
            m
            for r in self.tree.singles()
            if (
                m := ensemble.load(
                    task, held, ids, r.iteration, self.tree.workspace(r), self.tree.script(r)
                )
            )
        ]
        if len(members) < 2:
            return {
                "error": "fewer than two nodes' predictions could be read back as they were graded"
            }
        try:
            families = {r.iteration: r.parent for r in self.tree.singles() if r.operator == Operator.TUNE}
            made = ensemble.make(task, held, ids, members, self.config.seed, workspace, families)
        except ArtefactError as exc:  # the blend is graded like a script's predictions
            return {"error": str(exc)}
        write_text_atomic(folder / "script.py", ensemble.script(task, members, made.weights))
        result = RunResult(
            task=task.name,
            status="ok",
            exit_code=0,
            metric=task.metric_name,
            direction=task.direction,
            valid_metric=None,
            test_metric=made.grades.test,
            selection_metric=made.grades.selection,
            selection_rows=held.rows,
            error=None,
            stdout="",
            stderr="",
            wall_time=round(time.monotonic() - started, 3),
            peak_memory_mb=0.0,
            workspace=str(workspace),
            isolated=False,
            test_answers=task.has_answers,
        )
        return {
            "weights": made.weights,
            "folds": made.folds,
            "single": made.single,
            "single_sure": made.single_sure,
            "result": result.to_dict(),
        }
