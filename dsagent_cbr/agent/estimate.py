"""How far the run's selection score can be trusted, for the summary and the report: the selected
script's score with its bootstrap interval over the selection rows, and whether the next best script can
be told apart from it on them (harness/uncertainty.py). A blend's selection score is cross-fitted (each
fold of the rows graded with the weights the others chose), not what its predictions file holds: it gets neither."""

from __future__ import annotations

from pathlib import Path

from dsagent_cbr.agent.record import Estimate, Operator, Row
from dsagent_cbr.agent.rundir import row_workspace
from dsagent_cbr.harness.plan import hold_out
from dsagent_cbr.harness.uncertainty import Sample, selection_values
from dsagent_cbr.tasks.model import Task


def estimate(
    task: Task, rows: list[Row], best: Row | None, run_dir: Path, seed: int = 0
) -> Estimate | None:
    held = hold_out(task)
    if held is None or best is None or best.selection is None or best.operator == Operator.ENSEMBLE:
        return None
    values = selection_values(task, held, row_workspace(run_dir, best.script))
    if values is None:
        return None
    sample = Sample.of(task, held, seed)
    bounds = sample.interval(values)
    found = Estimate(low=bounds[0] if bounds else None, high=bounds[1] if bounds else None)
    others = [
        r
        for r in rows
        if r is not best and r.selection is not None and r.operator != Operator.ENSEMBLE
    ]
    if not others:
        return found
    runner = (max if task.direction == "maximize" else min)(others, key=lambda r: r.selection)
    theirs = selection_values(task, held, row_workspace(run_dir, runner.script))
    if theirs is not None:
        found.runner_up, found.apart = runner.iteration, sample.told_apart(values, theirs)
    return found


def intervals(
    task: Task, rows: list[Row], run_dir: Path, seed: int = 0
) -> dict[int, tuple[float, float]]:
    """Each graded script's selection score's interval, by iteration, drawn as the run's estimate
    draws the selected one's (the same seed); a blend, cross-fitted, has none, nor has a script
    whose predictions are gone."""
    held = hold_out(task)
    if held is None:
        return {}
    sample, found = Sample.of(task, held, seed), {}
    for row in rows:
        if row.selection is None or row.operator == Operator.ENSEMBLE:
            continue
        values = selection_values(task, held, row_workspace(run_dir, row.script))
        bounds = sample.interval(values) if values is not None else None
        if bounds:
            found[row.iteration] = (bounds[0], bounds[1])
    return found


def estimate_line(e: Estimate | None, rows: int | None) -> str | None:
    """One line: '90% interval 3.95 to 4.31 over the 206 selection rows; the next best (iteration 5) cannot
    be told apart from it on these rows'."""
    if e is None or e.low is None:
        return None
    line = f"{e.level:.0%} interval {e.low:.4g} to {e.high:.4g} over the {rows} selection rows"
    if e.runner_up is not None:
        line += f"; the next best (iteration {e.runner_up}) " + (
            "is worse on these rows" if e.apart else "cannot be told apart from it on these rows"
        )
    return line
