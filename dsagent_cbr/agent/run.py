"""One run of develop, the search or deploy: its typed record, the journal that makes it resumable, and
the effects every loop shares. The loops (develop.py, search.py, deploy.py) are short bodies over it.

    ask       a model step, journaled; a reply the model got wrong is recorded and comes back as None
    execute   a script run in the executor (the sandbox), journaled, its script kept in step-NN/
    consider  record a row's outcome; when its selection score is the best yet, publish its outputs
              and (develop, search) retain the (task, script) pair in the bank if it beats the starter
    refit     --refit: the selected script once more on every labelled row, selection rows included
              (agent/run_refit.py)
    stopping  how a run ends early (errors.py): the budget is a clean stop; an interrupt or a failure of
              ours saves the record and goes up to the CLI
    finish    summary.json, written after every iteration; observers (the report) told of it

Nothing here chooses by a number a script reports of itself or by a test score: the best row is the
best by selection score (harness/run.py grades it on rows the harness held back; only a task without
them falls back to the printed validation, and the record says so; the search's last choice, between
its blend and its best single node, compares the two on the same cross-fitted rows: search/ensemble.py),
and the test score of that choice is only recorded.

The refit's methods are apart, in agent/run_refit.py: a step at the run's end with rules of its own.
Run inherits them from RunRefit, so they are still Run's methods."""

from __future__ import annotations

import contextlib
import math
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from dsagent_cbr.agent.estimate import estimate
from dsagent_cbr.agent.journal import RunJournal
from dsagent_cbr.agent.progress import heartbeat
from dsagent_cbr.agent.record import Kind, Refit, Row, RunRecord, Status
from dsagent_cbr.agent.run_refit import RunRefit
from dsagent_cbr.agent.rundir import IMPORTANCE, publish_outputs, step_dir
from dsagent_cbr.agent.seams import Bank, Executor, Model, Observer, Progress, Quiet
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.clock import Clock
from dsagent_cbr.errors import (
    BudgetExceeded,
    Cancelled,
    CbrError,
    InfrastructureError,
    Outcome,
    outcome_of,
)
from dsagent_cbr.files import write_text_atomic
from dsagent_cbr.harness.baseline import prior_score
from dsagent_cbr.harness.plan import hold_out
from dsagent_cbr.harness.readers import FitRounds
from dsagent_cbr.harness.result import RunResult
from dsagent_cbr.harness.upload import write_submission
from dsagent_cbr.llm.parsing import ParseError
from dsagent_cbr.sandbox.scratch import clear_folder
from dsagent_cbr.tasks.model import Task

T = TypeVar("T")
FLOOR_BASELINE = "default LightGBM"  # the baselines' name for the search's floor draft
FIRST_GRADED = "first graded run better than the starter"


TRACEBACK = "traceback.txt"  # a bug of ours in a run: what it raised, for the report of it


class Run(RunRefit):
    def __init__(
        self,
        kind: Kind,
        task: Task,
        run_dir: Path,
        bank: Bank,
        executor: Executor,
        *,
        model: Model | None = None,
        progress: Progress | None = None,
        planned: int | None = None,
        seed: int = 0,
        sandbox: dict[str, object] | None = None,
        refit: bool = False,
        reference: float | None = None,
        retain: bool = True,
        observers: Sequence[Observer] = (),
        clock: Clock | None = None,
    ) -> None:
        self.task = task
        self.run_dir = run_dir
        self.bank = bank
        self.executor = executor
        self.model = model
        self.progress = progress or Quiet()
        self.wants_refit = refit
        self.retains = retain
        self.journal = RunJournal(run_dir)
        self.record = RunRecord(
            kind=kind,
            task=task.name,
            model=model.model if model else "none",
            metric=task.metric_name,
            direction=task.direction,
            seed=seed,
            run_dir=str(run_dir),
            planned_iterations=planned,
            test_answers=task.has_answers,
            sandbox=sandbox or {},
        )
        self.best: Row | None = None
        self.baseline: float | None = None  # the starter's score, when it ran
        self.prior: float | None = None  # a constant's from the training rows (harness/baseline.py)
        self.starter_seconds: float | None = None
        self.starter: RunResult | None = None  # its run: the submission when no node grades
        self.reference = reference  # the hand-written reference's, for the report only
        # LightGBM's defaults, as the search drafts them: the floor a submission stands against
        self.floor: float | None = None
        # set when a failure of ours or the budget stopped the run
        self.ended: Outcome | None = None
        # a --parallel search's nodes consider their rows from their own threads
        self.lock = threading.RLock()
        self.observers = tuple(observers)  # told of every save of the record (the report's drawer)
        # the command's wall clock: its budget bounds the starter and the refit
        self.clock = clock or Clock(None)
        # set as a stop begins: the steps in flight are cancelled, none begins
        self.halt = threading.Event()
        self.closed = threading.Event()  # set once the record is final: nothing is written after it

    @property
    def rows(self) -> list[Row]:
        return self.record.rows

    # -- journaled effects -------------------------------------------------------------------------
    def ask(self, t: int, role: str, fn: Callable[[], T], attempt: int = 0) -> T | None:
        """A model step, once per (iteration, role, attempt) across resumes. A reply the model got wrong
        is journaled with its raw text and comes back as None; everything else propagates."""
        self.open_for(t, halted=True)
        self.say(t, role, attempt)

        def guarded() -> dict[str, object]:
            try:
                return {"value": fn()}
            except ParseError as exc:
                return {"error": str(exc), "raw": exc.raw}

        with heartbeat(self.progress, iteration=t, role=role):
            out = self.journal.step(t, role, guarded, attempt=attempt)
        return out.get("value") if "error" not in out else None  # type: ignore[return-value]

    def execute(
        self,
        t: int,
        attempt: int,
        code: str,
        *,
        refit: bool = False,
        timeout: float | None = None,
        folder: Path | None = None,
        cancel: threading.Event | None = None,
        first_fit: FitRounds | None = None,
    ) -> RunResult:
        """Run `code` as step t's attempt (step-NN/, step-NN/debug-K/, or refit/ unless `folder` says
        where), once across resumes; `cancel` set meanwhile kills it (errors.Cancelled). A refit is
        given its `first_fit`'s rounds (seams.Executor)."""
        self.open_for(t)
        self.say(t, "refit" if refit else "execute", attempt)
        folder = folder or (self.run_dir / "refit" if refit else step_dir(self.run_dir, t, attempt))
        write_text_atomic(folder / "script.py", code)
        role = "refit" if refit else "execute"
        with heartbeat(self.progress, iteration=t, role=role):
            output = self.journal.step(
                t,
                role,
                lambda: self.executor.run(
                    code,
                    folder / "exec",
                    refit=refit,
                    timeout=timeout,
                    cancel=cancel,
                    first_fit=first_fit,
                ).to_dict(),
                attempt=attempt,
            )
        try:
            return RunResult.from_dict(output)
        except ValueError as exc:  # a replayed record someone edited
            raise self.journal.damaged(t, role, exc) from None

    def open_for(self, t: int, *, halted: bool = False) -> None:
        """Step t may go on: the run's record is not closed and, with `halted`, no stop has begun (a node's
        thread that outlived its run's stop must not change the run: it ends here, errors.Cancelled)."""
        if self.closed.is_set() or (halted and self.halt.is_set()):
            raise Cancelled(f"step {t} came after the run stopped")

    def say(self, t: int, role: str, attempt: int = 0) -> None:
        left = self.clock.left()
        self.progress.update(
            iteration=t,
            total=self.record.planned_iterations,
            role=role,
            attempt=attempt,
            best=self.best.score if self.best else None,
            tokens=self.record.tokens,
            cost=self.record.cost_usd,
            left=None if math.isinf(left) else max(left, 0.0),
        )

    # -- rows and the best so far ------------------------------------------------------------------
    def baseline_run(self) -> RunResult:
        """Iteration 0: the starter as it is, so that the log and the report start from a number."""
        self.progress.update(
            note="iteration 0: the task's starter train.py as it is, for a baseline"
        )
        result = self.execute(
            0, 0, self.task.starter.read_text(encoding="utf-8"), timeout=self.clock.limit()
        )
        self._judge(result)
        self.baseline = result.score if result.ok else None
        self.starter_seconds = result.wall_time
        self.starter = result
        self.prior = prior_score(self.task, hold_out(self.task))
        return result

    def _judge(self, result: RunResult) -> None:
        """What the run's choices are made on, as the first result shows it."""
        if result.ok:
            self.record.selection_rows = result.selection_rows
        if result.ok and self.record.selected_by != FIRST_GRADED:
            self.record.selected_by = "selection" if result.selection_rows else "validation"

    def begin(self, t: int, **fields: object) -> Row:
        row = Row(iteration=t, **fields)
        self.rows.append(row)
        return row

    def consider(
        self, row: Row, code: str, result: RunResult, attempt: int = 0, *, retain: str | None = None
    ) -> bool:
        """Record a run's outcome in its row; when its score is the best yet, make it the run's solution
        and, given a plan text to retain with it, add the pair to the bank when it has a selection score
        that beats the starter's."""
        with self.lock:
            return self._consider(row, code, result, attempt, retain)

    def _consider(
        self, row: Row, code: str, result: RunResult, attempt: int, retain: str | None
    ) -> bool:
        self.open_for(row.iteration, halted=True)
        self._judge(result)
        row.status = result.status
        row.error = result.error
        row.valid = result.valid_metric
        row.test = result.test_metric
        row.selection, row.score = result.selection_metric, result.score if result.ok else None
        row.wall_time = result.wall_time
        row.script = str(
            step_dir(self.run_dir, row.iteration, attempt).relative_to(self.run_dir) / "script.py"
        )
        if not self._improves(result):
            return False
        self.select(row, code, Path(result.workspace))
        if retain is not None:
            self.retain(row, code, retain)
        return True

    def select(self, row: Row, code: str, workspace: Path) -> None:
        """Make `row` (its script `code`) the run's solution, its outputs (left in `workspace`) published:
        the best row so far, or the search's last choice, which is not always the best scored."""
        with self.lock:
            self.open_for(row.iteration, halted=True)
            self.best = row
            publish_outputs(
                self.run_dir,
                self.task,
                code,
                workspace,
                hold_out(self.task) if self.record.selection_rows else None,
            )

    def retain(self, row: Row, code: str, plan: str) -> None:
        """Add the row's (task, script) pair and its insight to the bank, when the run retains and the
        row earned it; once across resumes."""
        if self.retains and self._retainable(row):
            row.retained = True
            ids = self.journal.step(row.iteration, "retain", lambda: self._retain(row, code, plan))
            self.record.retained.append({"iteration": row.iteration, **ids})

    def _improves(self, result: RunResult) -> bool:
        if not result.ok:
            return False
        # deploy keeps its first graded script beating the starter
        if self.record.selected_by == FIRST_GRADED:
            if self.best is not None:
                return False
            comparable = result.score is not None and self.baseline is not None
            return not comparable or self.task.metric.better(result.score, self.baseline)
        return self.task.metric.better(result.score, self.best.score if self.best else None)

    def _retainable(self, row: Row) -> bool:
        """The bank takes a solution only as judged by rows its script never saw labelled, and only one
        better than the task's starter."""
        return row.selection is not None and self.task.metric.better(row.selection, self.baseline)

    def _retain(self, row: Row, code: str, plan: str) -> dict[str, str]:
        """The (task, solution) pair as the paper's agent bank keeps it, with an insight of how it came."""
        task, extra = self.task, {"run": self.run_dir.name, "iteration": row.iteration}
        solution = Case(
            kind="solution",
            text=task.description,
            source_kind="retained",
            modality=task.modality,
            title=f"{task.name} (retained, iteration {row.iteration})",
            task_type=task.task_type,
            task_name=task.name,
            script=code,
            metric=task.metric_name,
            valid_score=row.valid,
            selection_score=row.selection,
            extra=extra,
        )
        insight = Case(
            kind="insight",
            text=f"Task: {task.description}\n\nPlan: {plan}\n\nLog: {row.log}",
            title=f"retained insight from {task.name}",
            competition=task.name,
            source_kind="retained",
            modality=task.modality,
            task_type=task.task_type,
            task_name=task.name,
            extra=extra,
        )
        self.bank.add([solution, insight])
        return {"solution": solution.id, "insight": insight.id}

    def close(self, refit_other: Callable[[Row], Refit | None] | None = None) -> RunRecord:
        """The run's last steps after its loop: the refit (a budget stop still gets it), then the record,
        final: nothing is written after it. `refit_other`: the loop's own refit of a selected row whose
        script it alone can refit (the search's blends); None from it where the row is one script."""
        with self.stopping():
            self.refit_best(refit_other)
            # after the refit, which the search kept its room for: on 1.4 million rows the estimate
            # took 2.5 s of the 25 s kept, and the refit of a 10-s first fit no longer fitted
            self.record.estimate = estimate(
                self.task, self.rows, self.best, self.run_dir, self.record.seed
            )
            self.fall_back_to_starter()
        return self.finish(final=True)

    def fall_back_to_starter(self) -> None:
        """No node graded: the starter's predictions, when it graded, are the run's submission. A run
        ends with the best submission it found; its record says whose (`submission_from`), and the
        run is still no success of the agent's (its outcome stays what no graded node makes it, and no
        best_solution.py is written: no solution of the run's own was found)."""
        starter = self.starter
        if self.best is not None or starter is None or not starter.ok or not self.task.predictions:
            return
        held = hold_out(self.task) if self.record.selection_rows else None
        write_submission(self.task, held, Path(starter.workspace), self.run_dir)
        self.record.submission_from = "starter"

    # -- how a run ends ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def stopping(self) -> Iterator[None]:
        """The budget ends the loop cleanly (what follows the block, the refit, still runs); an interrupt
        or a failure of ours discards the step in flight, saves the record, and goes up to the CLI."""
        try:
            yield
        except BudgetExceeded as exc:
            self.stop(Outcome.BUDGET, f"budget: {exc}")
            self.discard_in_flight()
        except (KeyboardInterrupt, InfrastructureError) as exc:
            outcome = outcome_of(exc) or Outcome.INFRASTRUCTURE
            self.stop(
                outcome,
                "interrupted" if outcome is Outcome.INTERRUPTED else f"infrastructure: {exc}",
            )
            self.discard_in_flight()
            self.finish(final=True)
            raise
        except Exception as exc:
            if isinstance(exc, CbrError):  # the user's input: said as it is
                raise
            # a bug of ours: the record says so (never "completed"), and the traceback is kept
            kept = self.run_dir / TRACEBACK
            write_text_atomic(kept, "".join(traceback.format_exception(exc)))
            why = f"a failure of ours (a bug in cbr): {type(exc).__name__}: {exc}"
            self.stop(Outcome.INFRASTRUCTURE, why)
            self.discard_in_flight()
            self.finish(final=True)
            raise InfrastructureError(f"{why}; its traceback is in {kept}") from exc

    def stop(self, outcome: Outcome, why: str) -> None:
        self.halt.set()
        self.ended, self.record.stopped = outcome, why

    def discard_in_flight(self) -> None:
        """The iterations in flight when the run stopped (a --parallel search has several) leave no row
        and no folder; resume redoes them."""
        with self.lock:
            for row in [r for r in self.rows if r.status == Status.NOT_RUN]:
                self.rows.remove(row)
                clear_folder(step_dir(self.run_dir, row.iteration))

    def end(self, row: Row) -> RunRecord:
        """An iteration is over: one progress line, and the record saved. A search node's line names its
        operator: with nodes in flight side by side, the role said last may be another node's."""
        self.progress.update(
            iteration=row.iteration,
            role=row.operator or None,
            status=row.status,
            score=row.score,
            best=self.best.score if self.best else None,
            metric=self.task.metric_name,
        )
        return self.finish()

    def finish(self, *, final: bool = False) -> RunRecord:
        """The record saved and the observers told; `final`: the last time, after which nothing is written."""
        with self.lock:
            self.open_for(-1)
            self.record.final = final
            record = self._finish()
            for observer in self.observers:
                observer.saved(record, final=final)
            if final:
                self.closed.set()
                self.journal.close()
            return record

    def _finish(self) -> RunRecord:
        record, best = self.record, self.best
        if self.model is not None:
            usage = self.model.usage()
            record.tokens, record.cost_usd = usage["tokens"], usage["cost_usd"]
        record.outcome = self.ended or (Outcome.OK if best else Outcome.AGENT_FAILURE)
        record.exit_code = record.outcome.exit_code
        record.best_iteration = best.iteration if best else None
        record.best_valid, record.best_test = (best.valid, best.test) if best else (None, None)
        record.best_selection, record.best_score = (
            (best.selection, best.score) if best else (None, None)
        )
        record.baselines = {
            "starter": self.baseline,
            "prior": self.prior,
            "reference": self.reference,
            FLOOR_BASELINE: self.floor,
        }
        record.took = round(self.clock.now(), 1)
        record.model_errors = self.journal.errors()
        record.best_solution = str(self.run_dir / "best_solution.py") if best else None
        submitted = best or record.submission_from == "starter"
        record.submission = (
            str(self.run_dir / self.task.predictions)
            if submitted and self.task.predictions
            else None
        )
        importance = self.run_dir / IMPORTANCE
        record.feature_importance = str(importance) if importance.is_file() else None
        record.save(self.run_dir)
        return record
