"""The budgeted search's loop with in-process fakes of the bank, the adapter and the executor: drafts,
transplants, tunes, blends, the budget, resumes and stops (its refits are test_search_refits.py; its
policy with plain values is test_policy.py; the model's moves in the loop are test_search_model.py; the
real loop on a real task runs in test_results.py and, with a scripted model, in test_develop.py and
test_search_scripted.py)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path

import pytest
from conftest import prepared
from support.fakes import FakeBank, FakeExecutor
from support.search_fakes import (
    STARTER,
    Overlapping,
    boosters,
    executor,
    fake_adapter,
    slow_blends_once_the_nodes_end,
    solution,
)
from support.workspace_rows import noisy_answers

from dsagent_cbr import clock as clock_module
from dsagent_cbr.agent.develop import DevelopConfig
from dsagent_cbr.agent.journal import RunJournal
from dsagent_cbr.agent.record import Row
from dsagent_cbr.errors import BudgetExceeded, Cancelled
from dsagent_cbr.search import operators as search_module
from dsagent_cbr.search.drafts import FLOOR_CASE
from dsagent_cbr.search.loop import develop_search, submitted_choice
from dsagent_cbr.search.policy import EXTRA_SHARE
from dsagent_cbr.tasks.metrics import get_metric


@pytest.fixture(scope="module")
def task():
    return prepared("concrete-strength")


def test_the_search_drafts_transplants_tunes_ensembles_and_retains_its_best_single_once(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    monkeypatch.setattr(search_module, "general_cases", boosters)  # the flow: two drafts
    bank = FakeBank(solutions=[solution("first"), solution("unadaptable"), solution("good")])
    runs = executor(noisy_answers(task))
    record = develop_search(task, DevelopConfig(iterations=8), tmp_path, bank, runs)
    operators = [r.operator for r in record.rows]
    assert operators == ["draft", "draft", "transplant", "tune", "ensemble", "transplant", "tune", "transplant", "ensemble"]
    assert [r.case for r in record.rows if r.operator == "draft"] == ["general", "general-xgboost"]
    assert [r.status for r in record.rows if r.operator == "transplant"] == ["ok", "not adaptable", "ok"]
    tuned = [r for r in record.rows if r.operator == "tune"]
    assert all(r.parent in (1, 2, 3) and r.tuned for r in tuned)
    draft_tunes = [r for r in tuned if r.parent == 1]
    if draft_tunes:  # a tuned draft sets new literals, and they grade better here
        code = (tmp_path / draft_tunes[0].script).read_text()
        assert "num_leaves=31," not in code and "# general" in code
    blends = [r for r in record.rows if r.operator == "ensemble"]
    assert len(blends) == 2 and record.rows[-1].operator == "ensemble"  # and once more at the end
    singles = {r.iteration for r in record.rows if r.operator != "ensemble" and r.score is not None}
    assert all(b.status == "ok" and set(b.members) <= singles and len(b.members) >= 2 for b in blends)
    assert "MEMBERS = " in (tmp_path / blends[0].script).read_text()
    # the last blend is the solution: its members' independent noise averages out, so it beats taking the
    # best single node on the same cross-fitted rows (though that node's own score, the best of many, is lower)
    single_taken = RunJournal(tmp_path).recorded(blends[-1].iteration, "ensemble")["single"]
    assert record.best_iteration == blends[-1].iteration and f"scores {single_taken}" in blends[-1].log
    assert blends[-1].score < single_taken and min(r.score for r in record.rows if r.iteration in singles) < single_taken
    assert (tmp_path / "submission.csv").is_file()
    assert record.stopped == "the cap of 8 nodes reached after 9 node(s)"
    single = min((r for r in record.rows if r.iteration in singles), key=lambda r: r.score)
    assert len(record.retained) == 1 and record.retained[0]["iteration"] == single.iteration and len(bank.added) == 2
    assert runs.timeouts == [None] * len(runs.timeouts)  # no budget: the sandbox's own limit only


def test_an_ensemble_without_predictions_to_blend_is_recorded_and_the_search_goes_on(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    record = develop_search(task, DevelopConfig(iterations=7), tmp_path,
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
    record = develop_search(task, DevelopConfig(iterations=100, budget=60.0), tmp_path,
                                   FakeBank(solutions=[solution("first"), solution("good")]), runs)
    assert record.stopped.startswith("the budget of 1m spent after ") and 1 <= len(record.rows) < 10
    limits = runs.timeouts[1:]  # after the starter's
    assert all(limit is not None and 0 < limit <= 60 for limit in limits) and limits == sorted(limits, reverse=True)
    assert [r.started for r in record.rows] == sorted(r.started for r in record.rows)


def test_a_resumed_search_replays_its_tree_and_grows_it(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    monkeypatch.setattr(search_module, "general_cases", boosters)  # the flow: two drafts
    bank = FakeBank(solutions=[solution("first"), solution("good")])
    first = develop_search(task, DevelopConfig(iterations=3), tmp_path, bank, executor(noisy_answers(task)))
    assert [r.operator for r in first.rows] == ["draft", "draft", "transplant", "ensemble"]  # the leg's last blend
    again = executor(noisy_answers(task))
    resumed = develop_search(task, DevelopConfig(iterations=5), tmp_path, bank, again)
    # the same tree; what is retained is the best single node when the search ends: here a later tune
    assert [r.model_dump(exclude={"retained"}) for r in resumed.rows[:4]] == \
        [r.model_dump(exclude={"retained"}) for r in first.rows]
    assert [r.operator for r in resumed.rows[4:]] == ["tune", "ensemble"]
    assert len(again.runs) == 1  # only the new script node ran


def test_with_parallel_two_nodes_run_at_once_and_the_tree_resumes_the_same(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    monkeypatch.setattr(search_module, "general_cases", boosters)
    bank = FakeBank(solutions=[solution("first"), solution("good")])
    runs = Overlapping(task, 0.2)
    record = develop_search(task, DevelopConfig(iterations=7, parallel=2), tmp_path, bank, runs)
    assert runs.most == 2 and [r.iteration for r in record.rows] == list(range(1, len(record.rows) + 1))
    assert {r.operator for r in record.rows} >= {"draft", "transplant", "tune", "ensemble"}
    assert all(r.status != "not run" for r in record.rows) and record.outcome == "ok"
    transplanted = [r.case for r in record.rows if r.operator == "transplant"]
    assert transplanted == ["first", "good"]  # two transplants in flight at once still take the next case each
    again = Overlapping(task, 0.2)
    resumed = develop_search(task, DevelopConfig(iterations=7, parallel=2), tmp_path, bank, again)
    assert [r.model_dump() for r in resumed.rows] == [r.model_dump() for r in record.rows] and not again.runs


class Stopping(FakeExecutor):
    """The second draft's script runs until its run is stopped (it then ends as a cancelled script does);
    the first transplant's node meets the spending limit (what --max-cost raises in a node's thread)."""

    def __init__(self, task) -> None:
        super().__init__(executor().grades, predictions=noisy_answers(task))
        self.cancelled = threading.Event()

    def run(self, code, folder, refit=False, timeout=None, cancel=None, first_fit=None):
        if "# general-xgboost" in code:
            assert cancel is not None and cancel.wait(30), "the stop never cancelled the script in flight"
            self.cancelled.set()
            raise Cancelled("the run stopped while this script ran")
        if "# first" in code:
            time.sleep(0.3)  # the general draft is graded first
            raise BudgetExceeded("spent $0.51 of --max-cost 0.50")
        return super().run(code, folder, refit, timeout, cancel)


def test_a_stop_cancels_the_nodes_in_flight_and_nothing_changes_after_the_record(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    monkeypatch.setattr(search_module, "general_cases", boosters)  # the flow: two drafts
    runs = Stopping(task)
    record = develop_search(task, DevelopConfig(iterations=9, parallel=2), tmp_path,
                            FakeBank(solutions=[solution("first")]), runs)
    assert runs.cancelled.is_set() and record.outcome == "budget" and "max-cost" in record.stopped
    assert [r.iteration for r in record.rows] == [1] and record.best_iteration == 1  # the cancelled node left nothing
    assert not (tmp_path / "step-02").exists() and not (tmp_path / "step-03").exists()
    assert "num_leaves=31," in (tmp_path / "best_solution.py").read_text()  # the node summary.json names
    written = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    time.sleep(0.5)
    assert written == {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}


def test_a_search_of_twenty_fake_nodes_takes_under_a_second(task, tmp_path, monkeypatch):
    """The loop with fakes draws no chart and waits on nothing: the report is an observer's (report/)."""
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    bank = FakeBank(solutions=[solution(f"case-{i}") for i in range(6)])
    develop_search(task, DevelopConfig(iterations=3), tmp_path / "warm", bank, executor())  # imports, caches
    started = time.perf_counter()
    record = develop_search(task, DevelopConfig(iterations=20), tmp_path / "run", bank, executor())
    assert time.perf_counter() - started < 1.0 and len(record.rows) >= 20
    assert {r.operator for r in record.rows} >= {"draft", "transplant", "tune", "ensemble"}


class Limits(FakeExecutor):
    """Writes down the time limit each first fit was given, by its script's first line."""

    def __init__(self, task) -> None:
        super().__init__(executor().grades, predictions=noisy_answers(task))
        self.limits: dict[str, float | None] = {}

    def run(self, code, folder, refit=False, timeout=None, cancel=None, first_fit=None):
        if not refit:
            self.limits[code.split("\n")[0]] = timeout
        return super().run(code, folder, refit, timeout, cancel)


def test_a_draft_there_for_the_blends_variety_runs_for_a_share_of_the_budget_at_most(task, tmp_path, monkeypatch):
    """CatBoost's draft took 120 s of a five-minute run on diamonds-cut, still learning, and weighed 0.05 in
    the blend; it now stops at a fifth of the budget and keeps what it learned, where the boosters that
    lead have what is left."""
    first = boosters(task)[0]
    catboost = dataclasses.replace(first, task_name="general-catboost")
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    monkeypatch.setattr(search_module, "general_cases", lambda task: [first, catboost])
    runs = Limits(task)
    develop_search(task, DevelopConfig(iterations=2, budget=300.0), tmp_path, FakeBank(), runs)
    assert runs.limits["import os  # general-catboost"] <= EXTRA_SHARE * 300.0 < runs.limits["import os  # general"]


class Rounds(FakeExecutor):
    """The 31-leaf (or another) draft's run writes down the rounds its booster kept, as the bootstrap does."""

    def __init__(self, task, rounds: int, draft: str = "general") -> None:
        super().__init__(executor().grades, predictions=noisy_answers(task))
        self.rounds, self.draft = rounds, draft

    def run(self, code, folder, refit=False, timeout=None, cancel=None, first_fit=None):
        result = super().run(code, folder, refit, timeout, cancel)
        if f"# {self.draft}\n" in code and not refit:
            kept = {"calls": [self.rounds], "models": [self.rounds]}
            (folder / "workspace" / "cbr_fit_rounds.json").write_text(json.dumps(kept))
        return result


@pytest.mark.parametrize(("rounds", "order"), [(3000, ["general", "general-deep", "general-deep-xgboost"]),
                                               (1000, ["general", "general-xgboost", "general-deep"])])
def test_a_31_leaf_draft_that_kept_thousands_of_rounds_has_the_deep_draft_next(task, tmp_path, monkeypatch,
                                                                               rounds, order):
    """Still learning after thousands of rounds, the booster wants larger trees (drafts.DEEP_SIGNAL), and
    XGBoost grows them too; a resume drafts in the order the run did, without running anything again."""
    first, xgboost = boosters(task)
    deep = dataclasses.replace(first, task_name="general-deep")
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    monkeypatch.setattr(search_module, "general_cases", lambda task: [first, xgboost, deep])
    record = develop_search(task, DevelopConfig(iterations=3), tmp_path, FakeBank(), Rounds(task, rounds))
    assert [r.case for r in record.rows if r.operator == "draft"] == order
    again = Rounds(task, 0)
    resumed = develop_search(task, DevelopConfig(iterations=3), tmp_path, FakeBank(), again)
    assert [r.case for r in resumed.rows if r.operator == "draft"] == order and not again.runs


@pytest.mark.parametrize(("rounds", "order"), [
    (300, ["general-quick", "general-default", "general-deep", "general-deep-xgboost"]),
    (100, ["general-quick", "general-default", "general", "general-xgboost"])])
def test_a_quick_draft_still_learning_at_its_last_round_has_the_deep_draft_in_the_31_leaf_one_s_place(
        task, tmp_path, monkeypatch, rounds, order):
    """The quick draft's 300 rounds at a high learning rate, all kept: the deep draft follows the floor
    (drafts.QUICK_SIGNAL), and the 31-leaf draft is not drafted; a resume keeps that order."""
    first, xgboost = boosters(task)
    quick, floor, deep = (dataclasses.replace(first, task_name=f"general-{k}") for k in ("quick", "default", "deep"))
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    monkeypatch.setattr(search_module, "general_cases", lambda task: [quick, floor, first, xgboost, deep])
    record = develop_search(task, DevelopConfig(iterations=4), tmp_path, FakeBank(), Rounds(task, rounds, "general-quick"))
    assert [r.case for r in record.rows if r.operator == "draft"] == order
    again = Rounds(task, 0)
    resumed = develop_search(task, DevelopConfig(iterations=4), tmp_path, FakeBank(), again)
    assert [r.case for r in resumed.rows if r.operator == "draft"] == order and not again.runs


def test_when_no_node_grades_the_starters_predictions_are_the_submission_and_say_so(task, tmp_path, monkeypatch):
    """A run ends with the best submission it found: the starter's, when it alone graded; the outcome
    stays the agent's failure, and the record says whose the submission is."""
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    nothing_grades = FakeExecutor({"def train_model": STARTER}, predictions=noisy_answers(task))
    record = develop_search(task, DevelopConfig(iterations=3), tmp_path, FakeBank(), nothing_grades)
    assert record.best_iteration is None and record.outcome == "agent_failure"
    assert record.submission_from == "starter" and Path(record.submission).is_file()
    graded = develop_search(task, DevelopConfig(iterations=3), tmp_path / "graded", FakeBank(),
                            executor(predictions=noisy_answers(task)))
    assert graded.best_iteration is not None and graded.submission_from == "selected"


def test_a_bug_of_ours_in_a_node_ends_the_run_as_ours_never_as_completed(task, tmp_path, monkeypatch):
    """A search died of SystemError from ast.parse while nodes ran in threads, and its record then said
    "ok, completed"."""
    import json

    from dsagent_cbr.errors import InfrastructureError

    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)

    class Buggy(FakeExecutor):
        def run(self, code, folder, refit=False, timeout=None, cancel=None, first_fit=None):
            if "# first" in code:
                raise SystemError("AST constructor recursion depth mismatch")
            return super().run(code, folder, refit, timeout, cancel)

    runs = Buggy(executor().grades, predictions=noisy_answers(task))
    with pytest.raises(InfrastructureError, match="a failure of ours .*SystemError"):
        develop_search(task, DevelopConfig(iterations=9), tmp_path, FakeBank(solutions=[solution("first")]), runs)
    record = json.loads((tmp_path / "summary.json").read_text())
    assert record["outcome"] == "infrastructure" and "SystemError" in record["stopped"]
    assert "recursion depth mismatch" in (tmp_path / "traceback.txt").read_text()


def test_a_last_blend_the_budget_has_no_time_for_is_left_out_and_the_record_says_so(task, tmp_path, monkeypatch):
    """On a table of millions of rows the last blend takes seconds: it starts only if they are left."""
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    slow_blends_once_the_nodes_end(monkeypatch)
    record = develop_search(task, DevelopConfig(iterations=7, budget=600.0), tmp_path,
                            FakeBank(solutions=[solution("first"), solution("good")]), executor(noisy_answers(task)))
    assert [r.operator for r in record.rows].count("ensemble") == 1  # the one after the five drafts
    assert record.rows[-1].operator != "ensemble"
    assert record.stopped.startswith("the cap of 7 nodes reached after 7 node(s); no last blend: it needs about")


def test_the_floor_is_submitted_when_its_own_score_beats_the_fair_score_of_the_blend_or_the_single_node():
    """The floor was drafted, not chosen by its score: its selection score is as fair as a blend's cross-fitted
    one, where the best single node's own score (the best of many) is not (military-gender at 5m: the floor
    0.66996, the blend 0.66936)."""
    better = get_metric("auroc").better
    blend = Row(iteration=6, operator="ensemble", score=0.66936)
    single = Row(iteration=3, operator="draft", case="general", score=0.6705)  # the best of five on these rows
    floor = Row(iteration=2, operator="draft", case=FLOOR_CASE, score=0.66996)
    assert submitted_choice(blend, single, 0.6690, floor, better) is floor
    assert submitted_choice(blend, single, 0.6690, None, better) is blend  # no floor ran: the blend
    assert submitted_choice(blend, single, 0.6701, floor, better) is single  # the single node did better, fairly
    assert submitted_choice(blend, single, None, None, better) is blend  # not beyond the noise (Blend.single_sure)
    assert submitted_choice(blend, single, 0.6690, floor.model_copy(update={"score": 0.6690}), better) is blend
