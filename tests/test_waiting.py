"""Progress while a model call or a cell runs (analysis/waiting.py): a line every EVERY seconds
saying what is awaited and for how long; `cbr analyze` was silent for minutes while a slow model
thought."""

from __future__ import annotations

import time

from support.analysis_fakes import FakeKernel, cell, run
from support.fakes import FakeModel

from dsagent_cbr.analysis import waiting as waiting_module
from dsagent_cbr.analysis.waiting import waiting


def test_a_line_comes_every_period_while_the_block_runs_and_none_after():
    lines: list[str] = []
    with waiting(lines.append, "the model's plan", 120.0, every=0.05):
        time.sleep(0.28)
    count = len(lines)
    time.sleep(0.15)
    assert 4 <= count <= 6 and len(lines) == count
    assert lines[0] == "waiting for the model's plan: 0 s so far, at most 120 s"
    with waiting(lines.append, "a cell", float("inf"), every=0.05):
        time.sleep(0.08)
    assert lines[-1].endswith("so far")


class SlowModel(FakeModel):
    def complete(self, role, messages, **kwargs):
        time.sleep(0.12)
        return super().complete(role, messages, **kwargs)


class SlowKernel(FakeKernel):
    def run_cell(self, code, timeout=60.0):
        time.sleep(0.12)
        return super().run_cell(code, timeout)


def test_an_analysis_says_what_it_waits_for(tmp_path, monkeypatch):
    monkeypatch.setattr(waiting_module, "EVERY", 0.05)
    replies = {"analyze_plan": ["1. Compute the mean."], "analyze_cell": [cell("print(4)")],
               "analyze_answer": ["@mean_sales[4]"]}
    monkeypatch.setattr("support.analysis_fakes.FakeModel", SlowModel)
    result, _, _ = run(tmp_path, replies, SlowKernel())
    said = "\n".join(result.lines)
    for what in ("cbr's first cell to run", "the model's plan", "the model's cell for step 1/1",
                 "the cell of step 1 to run", "the model's answer"):
        assert f"waiting for {what}: 0 s so far" in said
