"""The budgeted search without a model: its policy with plain values, its loop with in-process fakes of
the bank, the adapter and the executor (the real loop on a real task runs in test_results.py)."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import prepared
from support.fakes import FakeBank, FakeExecutor, Graded

from dsagent_cbr.agent import search as search_module
from dsagent_cbr.agent.develop import DevelopConfig
from dsagent_cbr.agent.search import develop_without_model
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.search import clock as clock_module
from dsagent_cbr.search.clock import Clock, parse_duration
from dsagent_cbr.search.policy import Family, Move, View, choose
from dsagent_cbr.tasks.selection import hold_out

STARTER = Graded(selection=16.0, test=16.0)


@pytest.fixture(scope="module")
def task():
    return prepared("concrete-strength")


def test_the_policy_drafts_then_alternates_transplants_and_tunes_then_stops():
    rng = random.Random(0)
    best, other = Family(1, 4.0, True), Family(2, 6.0, True)
    assert choose(View(True, 3, [], ""), rng) == Move("draft")
    assert choose(View(False, 3, [best], "draft"), rng) == Move("transplant")
    assert choose(View(False, 2, [best, other], "transplant"), random.Random(1)) == Move("tune", parent=1)
    assert choose(View(False, 2, [best, other], "tune"), rng) == Move("transplant")
    assert choose(View(False, 2, [Family(1, None, True)], "transplant"), rng) == Move("transplant")  # nothing to tune
    assert choose(View(False, 0, [Family(1, 4.0, False)], "transplant"), rng) == Move("stop")
    parents = {choose(View(False, 0, [best, other], "tune"), random.Random(seed)).parent for seed in range(40)}
    assert parents == {1, 2}  # mostly the best family, sometimes the next
    assert choose(View(False, 2, [best, other], "tune", can_ensemble=True, fresh=4), rng) == Move("ensemble")
    assert choose(View(False, 2, [best, other], "tune", can_ensemble=True, fresh=3), rng) == Move("transplant")
    assert choose(View(False, 2, [best, other], "tune", can_ensemble=False, fresh=9), rng) == Move("transplant")


def test_the_room_a_node_needs_shrinks_to_what_nodes_have_taken():
    clock = Clock(60.0)
    assert clock.room() == 20.0  # nothing has run yet
    clock.took(2.0)
    clock.took(4.0)
    assert clock.room() == pytest.approx(4.5)  # 1.5 times their median
    clock.took(300.0)
    clock.took(300.0)
    assert clock.room() == 20.0  # never more than 20 s: the last node's limit shrinks to what is left


def test_durations_read_as_a_user_writes_them():
    assert [parse_duration(d) for d in ("90", "90s", "15m", "1.5h")] == [90, 90, 900, 5400]
    for bad in ("soon", "-5m", "0"):
        with pytest.raises(ValueError, match="duration"):
            parse_duration(bad)


def fake_adapter(case: Case, task: object) -> dict:
    if case.task_name == "unadaptable":
        return {"error": "no rule for this pair"}
    model = "LGBMRegressor(num_leaves=31, learning_rate=0.05)" if case.task_name == "general" else "Ridge(alpha=1.0)"
    return {"code": f"import os  # {case.task_name}\nmodel = {model}\n", "notes": []}


def solution(name: str) -> Case:
    return Case(kind="solution", text=f"{name} task", task_name=name, source_kind="reference",
                script=f"model = Ridge(alpha=0.1)  # {name}\n", modality="tabular", task_type="regression")


def executor(predictions: object = None) -> FakeExecutor:
    """The draft as adapted grades 5; any tuned draft 4 (better: rmse); the cases 9 and 6."""
    return FakeExecutor({"def train_model": STARTER, "num_leaves=31,": Graded(selection=5.0, test=5.5),
                         "# general": Graded(selection=4.0, test=4.5), "# first": Graded(selection=9.0),
                         "# good": Graded(selection=6.0)}, predictions=predictions)


def noisy_answers(task):
    """Predictions a fake node writes: the answers (test and selection rows) with noise of its own."""
    held = hold_out(task)
    test = pd.read_csv(task.private_dir / task.answers)
    rows = pd.concat([test, held.answers.astype({"compressive_strength": float})], ignore_index=True)

    def write(code: str, workspace: Path) -> None:
        rng = np.random.default_rng(zlib.crc32(code.encode()))
        noisy = rows.assign(compressive_strength=rows["compressive_strength"] + rng.normal(0, 5, len(rows)))
        noisy.to_csv(workspace / task.predictions, index=False)

    return write


def test_the_search_drafts_transplants_tunes_ensembles_and_retains_its_best_single_once(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    bank = FakeBank(solutions=[solution("first"), solution("unadaptable"), solution("good")])
    runs = executor(noisy_answers(task))
    record = develop_without_model(task, DevelopConfig(iterations=8), tmp_path, bank, runs)
    operators = [r.operator for r in record.rows]
    assert operators[:6] == ["draft", "transplant", "tune", "transplant", "tune", "ensemble"]
    assert [r.status for r in record.rows if r.operator == "transplant"] == ["ok", "not adaptable", "ok"]
    tuned = [r for r in record.rows if r.operator == "tune"]
    assert all(r.parent in (1, 2) and r.tuned for r in tuned)
    draft_tunes = [r for r in tuned if r.parent == 1]
    if draft_tunes:  # a tuned draft sets new literals, and they grade better here
        code = (tmp_path / draft_tunes[0].script).read_text()
        assert "num_leaves=31," not in code and "# general" in code
    blends = [r for r in record.rows if r.operator == "ensemble"]
    assert len(blends) == 2 and record.rows[-1].operator == "ensemble"  # and once more at the end
    singles = {r.iteration for r in record.rows if r.operator != "ensemble" and r.score is not None}
    assert all(b.status == "ok" and set(b.members) <= singles and len(b.members) >= 2 for b in blends)
    assert "MEMBERS = " in (tmp_path / blends[0].script).read_text()
    best = next(r for r in record.rows if r.iteration == record.best_iteration)
    assert record.best_score == min(r.score for r in record.rows if r.score is not None) == best.score
    assert record.stopped == "the cap of 8 nodes reached after 9 node(s)"
    single = min((r for r in record.rows if r.iteration in singles), key=lambda r: r.score)
    assert len(record.retained) == 1 and record.retained[0]["iteration"] == single.iteration and len(bank.added) == 2
    assert runs.timeouts == [None] * len(runs.timeouts)  # no budget: the sandbox's own limit only


def test_an_ensemble_without_predictions_to_blend_is_recorded_and_the_search_goes_on(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    record = develop_without_model(task, DevelopConfig(iterations=7), tmp_path,
                                   FakeBank(solutions=[solution("first"), solution("good")]), executor())
    blends = [r for r in record.rows if r.operator == "ensemble"]
    assert blends and all(b.status == "not blended" and "fewer than two" in b.error for b in blends)
    after = record.rows[record.rows.index(blends[0]) + 1:]
    assert any(r.operator != "ensemble" and r.status == "ok" for r in after)
    assert record.best_iteration not in {b.iteration for b in blends}


def test_the_budget_ends_the_search_and_shrinks_the_last_nodes_time_limit(task, tmp_path, monkeypatch):
    class Ticking:  # every reading of the clock is 7 seconds later
        now = 0.0

        def monotonic(self) -> float:
            self.now += 7.0
            return self.now

    monkeypatch.setattr(clock_module, "time", Ticking())
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    runs = executor()
    record = develop_without_model(task, DevelopConfig(iterations=100, budget=60.0), tmp_path,
                                   FakeBank(solutions=[solution("first"), solution("good")]), runs)
    assert record.stopped.startswith("the budget of 1m spent after ") and 1 <= len(record.rows) < 10
    limits = runs.timeouts[1:]  # after the starter's
    assert all(limit is not None and 0 < limit <= 60 for limit in limits) and limits == sorted(limits, reverse=True)
    assert [r.started for r in record.rows] == sorted(r.started for r in record.rows)


def test_a_resumed_search_replays_its_tree_and_grows_it(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    bank = FakeBank(solutions=[solution("first"), solution("good")])
    first = develop_without_model(task, DevelopConfig(iterations=3), tmp_path, bank, executor(noisy_answers(task)))
    assert [r.operator for r in first.rows] == ["draft", "transplant", "tune", "ensemble"]  # the leg's last blend
    again = executor(noisy_answers(task))
    resumed = develop_without_model(task, DevelopConfig(iterations=5), tmp_path, bank, again)
    assert [r.model_dump() for r in resumed.rows[:4]] == [r.model_dump() for r in first.rows]
    assert [r.operator for r in resumed.rows[4:]] == ["transplant", "ensemble"]
    assert len(again.runs) == 1  # only the new script node ran
