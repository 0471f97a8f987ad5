"""How sure a selection score is (harness/uncertainty.py): predictions written as a script writes them, for a
real task's test and selection rows, read back and bootstrapped."""

from __future__ import annotations

import numpy as np
from conftest import prepared
from support.workspace_rows import workspace_answers

from dsagent_cbr.harness.grading import grade
from dsagent_cbr.harness.plan import hold_out
from dsagent_cbr.harness.uncertainty import Sample, selection_values


def written(task, held, workspace, noise: float, seed: int):
    """A script's predictions file: the test rows, then the held rows, by the ids the workspace gives them."""
    rows = workspace_answers(task, held)
    rng = np.random.default_rng(seed)
    workspace.mkdir(parents=True)
    rows.assign(compressive_strength=rows["compressive_strength"] + rng.normal(0, noise, len(rows))).to_csv(
        workspace / task.predictions, index=False)
    return workspace


def test_the_interval_holds_the_score_and_close_scripts_cannot_be_told_apart(tmp_path):
    task = prepared("concrete-strength")
    held = hold_out(task)
    good, twin, poor = (written(task, held, tmp_path / name, noise, seed) for name, noise, seed in
                        (("good", 2.0, 1), ("twin", 2.0, 2), ("poor", 8.0, 3)))
    values = {w.name: selection_values(task, held, w) for w in (good, twin, poor)}
    assert all(v is not None and len(v) == held.rows for v in values.values())
    sample = Sample.of(task, held, seed=0)
    low, high = sample.interval(values["good"])
    assert low < grade(task, good, held).selection < high and high - low < 1.0  # a few hundred rows: a narrow band
    assert sample.told_apart(values["good"], values["poor"])
    assert not sample.told_apart(values["good"], values["twin"])  # the same noise: the rows cannot say which


def test_predictions_that_cannot_be_read_back_have_no_values(tmp_path):
    task = prepared("concrete-strength")
    (tmp_path / "empty").mkdir()
    assert selection_values(task, hold_out(task), tmp_path / "empty") is None
    (tmp_path / "empty" / task.predictions).write_text("id,compressive_strength\n1,x\n")
    assert selection_values(task, hold_out(task), tmp_path / "empty") is None


def test_draws_of_fewer_rows_narrowed_give_the_interval_of_draws_of_all_rows(tmp_path, monkeypatch):
    """Many selection rows are drawn a few thousand at a time; the narrowed spread stands for the full one."""
    task = prepared("concrete-strength")
    held = hold_out(task)
    values = selection_values(task, held, written(task, held, tmp_path / "good", 2.0, 1))
    low, high = Sample.of(task, held, seed=0).interval(values)
    monkeypatch.setattr("dsagent_cbr.harness.uncertainty.DRAW_ROWS", held.rows // 4)
    narrowed = Sample.of(task, held, seed=0)
    assert len(narrowed.draws[0]) == held.rows // 4
    few_low, few_high = narrowed.interval(values)
    assert few_low < grade(task, tmp_path / "good", held).selection < few_high
    assert abs((few_high - few_low) / (high - low) - 1) < 0.3
