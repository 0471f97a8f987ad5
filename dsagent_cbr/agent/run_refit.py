"""Run's refit: with --refit, the selected script once more on every labelled row, the selection rows
included.

It holds the refit's methods of Run: the refit itself, whether the budget leaves time for it, the held
rows as a refit sees them, and the refit's record. Run (agent/run.py) takes them from RunRefit, its base
class, so they stay Run's methods.

It is apart from agent/run.py, which holds the steps and the record every run shares. The refit is one
step at a run's end, with its own rules. How its predictions are judged is agent/refit.py's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dsagent_cbr.agent import refit
from dsagent_cbr.agent.record import Refit, Row, RunRecord
from dsagent_cbr.agent.rundir import publish_outputs, row_workspace
from dsagent_cbr.agent.seams import Progress
from dsagent_cbr.clock import Clock
from dsagent_cbr.harness.plan import Held, hold_out
from dsagent_cbr.harness.readers import read_fit_rounds, read_refit_rounds
from dsagent_cbr.harness.result import RunResult
from dsagent_cbr.harness.run import REFIT_VARIABLE, predict_room
from dsagent_cbr.harness.upload import test_values
from dsagent_cbr.tasks.model import Task


class RunRefit:
    """The refit's methods of Run. They read the run's attributes below, which Run sets, and run the
    script with Run's journaled `execute`."""

    task: Task
    run_dir: Path
    record: RunRecord
    best: Row | None
    wants_refit: bool
    clock: Clock
    progress: Progress
    execute: Callable[..., RunResult]

    def refit_best(self, refit_other: Callable[[Row], Refit | None] | None = None) -> None:
        """--refit: the selected script once more, given every labelled row (the selection rows too) and
        told to learn from its validation rows; its predictions become the submission unless they lie too
        far from the first fit's or it was cut short at its deadline (agent/refit.py). The selection score
        stays the record's estimate: it judged the script before the refit, not the model submitted.
        `refit_other`: the loop's own refit of the selected row (the search plans its refits)."""
        if not (self.wants_refit and self.best and self.best.script):
            return
        if refit_other is not None and (made := refit_other(self.best)) is not None:
            self.record.refit = made
            return
        code = (self.run_dir / self.best.script).read_text(encoding="utf-8")
        if REFIT_VARIABLE not in code:
            self.record.refit = Refit(
                status="skipped", why=f"the selected script does not read {REFIT_VARIABLE}"
            )
            return
        late = self.too_late_to_refit(self.best.wall_time or 0.0, "the first fit")
        if late is not None:
            self.record.refit = late
            return
        took = self.best.wall_time or 0.0
        self.progress.update(
            note=f"the refit: iteration {self.best.iteration}'s script again on every labelled row "
            f"(its first fit took {took:.0f} s)"
        )
        limit = self.clock.limit()
        first = row_workspace(self.run_dir, self.best.script)
        result = self.execute(
            self.best.iteration,
            0,
            code,
            refit=True,
            timeout=limit,
            first_fit=read_fit_rounds(first),
        )
        if not result.ok:
            self.record.refit = Refit(
                status=result.status, error=result.error, test_after_refit=result.test_metric
            )
            return
        rounds = read_refit_rounds(Path(result.workspace))
        if refit.cut_short(result.wall_time, limit, rounds):
            self.record.refit = refit.cut(result.test_metric, rounds)
            return
        self.record.refit = self.judged_refit(
            first, Path(result.workspace), result.test_metric, rounds
        )
        if self.record.refit.status == "ok":
            publish_outputs(
                self.run_dir, self.task, code, Path(result.workspace), self.refit_view()
            )

    def too_late_to_refit(self, took: float, what: str, keep: float = 0.0) -> Refit | None:
        """A refit that could not end within the budget is skipped (the first fit stays the submission):
        `took` is how long `what`, the fit to do again, took, and `keep` the seconds kept after the
        refit. It must have that long before its training's deadline, which keeps time to predict
        (a 1M-row refit started with 22 s, 12 s to train, was cut short where its first fit took 14 s)."""
        left = self.clock.left()
        limit = left - keep
        if limit - predict_room(limit) >= took:
            return None
        why = f"{max(left, 0):.0f} s of the budget left, and {what} took {took:.0f} s"
        return Refit(status="skipped", why=why)

    def refit_view(self) -> Held | None:
        """The held rows as a refit sees them (none among its test rows), where the task has them."""
        held = hold_out(self.task) if self.record.selection_rows else None
        return held.for_refit() if held is not None else None

    def judged_refit(
        self,
        first: Path,
        refit_workspace: Path,
        test: float | None,
        rounds: list[list[int]] | None,
    ) -> Refit:
        """The refit's record: submitted, or refused when its test predictions (in `refit_workspace`) lie
        too far from the first fit's (in `first`) to be as good (agent/refit.py)."""
        view = self.refit_view()
        if view is None:  # no selection rows: no score to hold the refit to
            return refit.refitted(test, rounds, "not compared: the task has no selection rows")
        held = hold_out(self.task)
        assert held is not None and self.best is not None
        why, agreement = refit.judge(
            self.task.metric,
            self.best.selection,
            test_values(self.task, held, first),
            test_values(self.task, view, refit_workspace),
        )
        if why:
            return Refit(status="refused", why=why, agreement=agreement, test_after_refit=test)
        return refit.refitted(test, rounds, agreement)
