"""The budgeted search's loop with in-process fakes of the bank, the adapter, the executor and the model (its
policy with plain values is test_policy.py; the real loop on a real task runs in test_results.py and, with a
scripted model, in test_develop.py and test_search_scripted.py)."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import prepared
from support.fakes import FakeBank, FakeExecutor, FakeModel, Graded
from support.workspace_rows import noisy_answers

from dsagent_cbr import clock as clock_module
from dsagent_cbr.agent.develop import DevelopConfig
from dsagent_cbr.agent.journal import RunJournal
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.clock import Clock
from dsagent_cbr.errors import BudgetExceeded, Cancelled
from dsagent_cbr.search import operators as search_module
from dsagent_cbr.search.drafts import general_cases
from dsagent_cbr.search.loop import Search, develop_search
from dsagent_cbr.search.policy import (
    ENDING,
    MIN_PLAIN_SECONDS,
    REFIT_ROOM,
)
from dsagent_cbr.search.tree import Tree

STARTER = Graded(selection=16.0, test=16.0)


@pytest.fixture(scope="module")
def task():
    return prepared("concrete-strength")


def boosters(task) -> list[Case]:
    """The first two drafts without the floor (LightGBM's defaults): LightGBM and XGBoost."""
    return [c for c in general_cases(task) if c.task_name != "general-default"][:2]


def fake_adapter(case: Case, task: object) -> dict:
    if case.task_name == "unadaptable":
        return {"error": "no rule for this pair"}
    model = {"general": "LGBMRegressor(num_leaves=31, learning_rate=0.05)",
             "general-xgboost": "XGBRegressor(max_depth=6, learning_rate=0.1)"}.get(case.task_name, "Ridge(alpha=1.0)")
    return {"code": f"import os  # {case.task_name}\nmodel = {model}\n", "notes": []}


def solution(name: str) -> Case:
    return Case(kind="solution", text=f"{name} task", task_name=name, source_kind="reference",
                script=f"model = Ridge(alpha=0.1)  # {name}\n", modality="tabular", task_type="regression")


def executor(predictions: object = None) -> FakeExecutor:
    """The first draft as adapted grades 5; any tuned first draft 4 (better: rmse); the second draft 7; the
    cases 9 and 6."""
    return FakeExecutor({"def train_model": STARTER, "num_leaves=31,": Graded(selection=5.0, test=5.5),
                         "# general-xgboost": Graded(selection=7.0, test=7.5),
                         "# general": Graded(selection=4.0, test=4.5), "# first": Graded(selection=9.0),
                         "# good": Graded(selection=6.0)}, predictions=predictions)


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


def test_a_refit_blend_refits_each_member_and_blends_their_test_predictions(task, tmp_path, monkeypatch):
    def reading_refit(case: Case, task: object) -> dict:
        adapted = fake_adapter(case, task)
        return {**adapted, "code": adapted["code"] + "# CBR_REFIT\n"} if "code" in adapted else adapted

    monkeypatch.setattr(search_module, "adapt_case", reading_refit)
    runs = executor(noisy_answers(task))
    record = develop_search(task, DevelopConfig(iterations=4, refit=True), tmp_path,
                            FakeBank(solutions=[solution("first"), solution("good")]), runs)
    best = next(r for r in record.rows if r.iteration == record.best_iteration)
    assert best.operator == "ensemble" and record.refit.status == "ok", record.refit
    refits = [code for code, refit in runs.runs if refit]
    assert len(refits) == len(best.members) and all((tmp_path / "refit" / f"node-{k:02d}").is_dir() for k in best.members)
    assert record.refit.test_after_refit < best.test  # the refit members predict with less noise here
    submitted = pd.read_csv(tmp_path / task.predictions)
    assert len(submitted) == len(pd.read_csv(task.private_dir / task.answers))  # the test rows only
    assert "MEMBERS = " in (tmp_path / "best_solution.py").read_text()


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


PLAN = "Reflection: a start.\nDecision: {}"


def fenced(marker: str) -> str:
    return f"Here it is.\n```python\nimport os  # {marker}\nprint('ok')\n```\n"


def insight(n: int) -> Case:
    return Case(kind="insight", text=f"insight {n}: boosted trees with early stopping", title=f"case {n}",
                task_name=f"other-{n}", source_kind="kaggle")


def test_the_model_plans_debugs_and_improves_nodes_beside_the_plain_moves(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    monkeypatch.setattr(search_module, "general_cases", lambda task: general_cases(task)[:1])  # the model's moves
    model = FakeModel({"adapt": [fenced("adapted")], "rerank": ["[2] > [1]"] * 9,
                       "plan": [PLAN.format("ridge"), PLAN.format("trees"),
                                                             *[PLAN.format("deeper trees")] * 7],
                       "program": [fenced("broken"), fenced("trees"), *[fenced("deeper")] * 7],
                       "debug": [fenced("fixed")] * 3})
    runs = FakeExecutor({"def train_model": STARTER, "num_leaves=31,": Graded(selection=5.0, test=5.751),
                         "# general": Graded(selection=4.0, test=4.7451, stdout="printed by the draft"),
                         "# first": Graded(selection=9.0, test=9.7251), "# good": Graded(selection=6.0, test=6.7251),
                         "# fixed": Graded(selection=3.5, test=3.7751, stdout="printed by the fix"),
                         "# trees": Graded(selection=3.0, test=3.7251, stdout="printed by the trees"),
                         "# deeper": Graded(selection=2.5, test=2.7751), "# adapted": Graded(selection=4.5, test=4.9751)},
                        predictions=noisy_answers(task))
    bank = FakeBank(insights=[insight(1), insight(2)], solutions=[solution("first"), solution("good")])
    record = develop_search(task, DevelopConfig(iterations=9, in_turn=True), tmp_path, bank, runs, model=model)
    by = {r.iteration: r for r in record.rows}
    # the model's first node is a deploy's adaptation; its nodes improved the best faster than the plain ones:
    # it was asked more (policy.py's arms)
    assert [r.operator for r in record.rows] == ["draft", "adapt", "plan", "debug", "plan", "ensemble", "improve",
                                                 "improve", "improve", "ensemble"]
    assert by[2].score == 4.5 and by[2].step == "the nearest past solution, adapted in one call"
    assert by[3].status == "error" and by[4].parent == 3 and by[4].score == 3.5  # the fix is a node of its own
    assert by[9].score == 2.5
    assert record.best_score == min(r.score for r in by.values() if r.score is not None)
    prompts = dict(zip(model.roles, model.prompts, strict=True))  # each role's last prompt
    assert "NameError" in prompts["debug"] and "# broken" in prompts["debug"]
    improve_plan, improve_program = prompts["plan"], prompts["program"]
    parent = (tmp_path / by[by[9].parent].script).read_text()
    assert by[9].parent == 5 and parent in improve_plan and "printed by the trees" in improve_plan  # its own
    assert parent in improve_program and "change nothing else" in improve_program
    assert "Node 4 (debug of node 3)" in improve_plan and "selection rmse 3.5" in improve_plan
    first_plan = model.prompts[model.roles.index("plan")]  # a draft: the starter is a frame, not the current script
    assert "new solution written from scratch" in first_plan and "Current script" not in first_plan
    secret = {str(g.test) for g in runs.grades.values() if g.test is not None} - {"16.0"}
    assert not any(s in p for s in secret for p in model.prompts)  # no test score reaches the model
    assert [r["iteration"] for r in record.retained] == [7]  # the best single script, once


class Taking:
    """A fake clock for the search: the model's calls and the scripts take the seconds they are given."""

    def __init__(self, monkeypatch, call: float, script: float) -> None:
        from types import SimpleNamespace

        self.now, self.call, self.script = 0.0, call, script
        monkeypatch.setattr(clock_module, "time", SimpleNamespace(monotonic=lambda: self.now))

    def model(self, replies: dict) -> FakeModel:
        clock = self

        class Timed(FakeModel):
            def complete(self, role, messages, **options):
                clock.now += clock.call
                return super().complete(role, messages, **options)

        return Timed(replies)

    def executor(self, inner: FakeExecutor) -> FakeExecutor:
        clock, run = self, inner.run

        def timed(*args, **kwargs):
            clock.now += clock.script
            return dataclasses.replace(run(*args, **kwargs), wall_time=clock.script)

        inner.run = timed
        return inner


def test_a_model_whose_nodes_come_to_nothing_gets_less_of_the_budget_and_the_search_ends_graded(
        task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    taking = Taking(monkeypatch, call=30.0, script=10.0)
    model = taking.model({"adapt": ["no code here either"], "plan": ["Decision: something"] * 9,
                          "program": ["no code here, sorry"] * 30})
    bank = FakeBank(solutions=[solution("first"), solution("good")])
    record = develop_search(task, DevelopConfig(iterations=18, cbr=False, in_turn=True), tmp_path, bank,
                            taking.executor(executor()), model=model)
    asked = [r for r in record.rows if r.operator in ("adapt", "plan", "improve", "debug")]
    # an adapt call, then a plan and three program calls: two and a half minutes for nothing, against ten
    # seconds a plain node
    assert [(r.operator, r.status, r.ended - r.started) for r in asked] == [("adapt", "no script", 30.0),
                                                                            ("plan", "no script", 120.0)]
    after = [r.operator for r in record.rows if r.iteration > asked[-1].iteration]
    assert len(after) >= 8 and not set(after) & {"adapt", "plan", "improve", "debug"}  # the plain moves alone
    assert record.best_score <= 5.0 and record.outcome == "ok"  # at least the general draft


def test_no_node_starts_with_less_than_a_node_needs_and_a_model_node_is_charged_its_own_time(
        task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    taking = Taking(monkeypatch, call=25.0, script=7.0)
    model = taking.model({"adapt": [fenced("trees")], "plan": [PLAN.format("trees")] * 9,
                          "program": [fenced("trees")] * 9})
    runs = taking.executor(executor())
    runs.grades["# trees"] = Graded(selection=3.0, test=3.5)
    bank = FakeBank(solutions=[solution("first"), solution("good")])
    budget = 240.0
    record = develop_search(task, DevelopConfig(iterations=50, budget=budget, cbr=False, in_turn=True), tmp_path, bank, runs,
                            model=model)
    nodes = [r for r in record.rows if r.operator != "ensemble"]
    assert record.stopped.startswith("the budget of 4m spent")
    by_model = [r for r in nodes if r.operator in ("adapt", "plan", "improve")]
    assert all(budget - r.started >= 60.0 for r in by_model[:1])  # a model's first node: a minute
    assert all(budget - r.started >= 20.0 for r in by_model)  # none began with under 20 s of the budget left
    assert all(budget - r.started >= MIN_PLAIN_SECONDS for r in nodes)
    ran = [r for r in by_model if r.status == "ok"]
    calls = {"adapt": 1, "plan": 2, "improve": 2}  # a rerank is not asked with cbr off
    assert ran and all(r.ended - r.started == 25.0 * calls[r.operator] + 7.0 for r in ran)  # its own time
    cut = [r for r in by_model if r.status != "ok"]  # after its calls, too little left for its script
    assert all(r.status == "out of time" and "too little for its script" in r.error for r in cut)
    assert record.best_score == 3.0 and record.rows[record.best_iteration - 1].operator in ("adapt", "plan",
                                                                                            "improve", "ensemble")


class Overlapping(FakeExecutor):
    """A fake whose scripts take a moment (`pause` seconds), counting how many run at once."""

    def __init__(self, task, pause: float, **more: Graded) -> None:
        super().__init__({**executor().grades, **more}, predictions=noisy_answers(task))
        self.pause, self.now, self.most, self.lock = pause, 0, 0, threading.Lock()

    def run(self, *args, **kwargs):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.pause)
        try:
            return super().run(*args, **kwargs)
        finally:
            with self.lock:
                self.now -= 1


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


def test_a_model_node_is_written_beside_the_plain_ones_whose_scripts_keep_their_turns(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)

    class Slow(FakeModel):  # a model that takes a moment to answer, as a real one takes seconds
        def complete(self, role, messages, **options):
            time.sleep(0.4)
            return super().complete(role, messages, **options)

    model = Slow({"adapt": [fenced("good")], "rerank": ["[1]"] * 9, "plan": [PLAN.format("trees")] * 9,
                  "program": [fenced("trees")] * 9})
    bank = FakeBank(insights=[insight(1)], solutions=[solution("first"), solution("good")])
    runs = Overlapping(task, 0.05, **{"# trees": Graded(selection=3.0, test=3.5)})
    record = develop_search(task, DevelopConfig(iterations=9), tmp_path, bank, runs, model=model)
    plan = next(r for r in record.rows if r.operator == "plan")
    ran = [next(m for m in ("# trees", "# first", "# good", "# general") if m in code) for code, _ in runs.runs
           if "def train_model" not in code]
    after = [r for r in record.rows if r.iteration > plan.iteration and r.operator in ("transplant", "tune")]
    # plain nodes started after the model's node ran their scripts while it was being written, one at a time
    assert after and ran.index("# trees") > 1 + sum(r.operator == "draft" for r in record.rows) and runs.most == 1
    assert plan.score == 3.0 and record.best_score <= 3.0 and record.outcome == "ok"
    again = Overlapping(task, 0.05)
    resumed = develop_search(task, DevelopConfig(iterations=9), tmp_path, bank, again, model=model)
    assert [r.model_dump() for r in resumed.rows] == [r.model_dump() for r in record.rows] and not again.runs


def test_a_model_call_the_budget_cuts_short_ends_its_node_but_is_not_held_against_the_model(task, tmp_path,
                                                                                         monkeypatch):
    from dsagent_cbr.errors import OutOfTime

    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    model = FakeModel({"adapt": [OutOfTime("the budget ended 12 s into a call")],
                       "plan": [OutOfTime("the budget ended 12 s into a call")]})  # two in flight at once
    bank = FakeBank(solutions=[solution("first"), solution("good")])
    record = develop_search(task, DevelopConfig(iterations=3, budget=600.0, cbr=False), tmp_path, bank, executor(),
                            model=model)
    cut = next(r for r in record.rows if r.operator == "adapt")
    assert cut.status == "out of time" and "budget ended" in cut.error and record.outcome == "ok"
    assert model.timeouts and all(t is not None and 0 < t <= 600 for t in model.timeouts)  # each call's limit
    assert record.best_score is not None


class Stopping(FakeExecutor):
    """The second draft's script runs until its run is stopped (it then ends as a cancelled script does);
    the first transplant's node meets the spending limit (what --max-cost raises in a node's thread)."""

    def __init__(self, task) -> None:
        super().__init__(executor().grades, predictions=noisy_answers(task))
        self.cancelled = threading.Event()

    def run(self, code, folder, refit=False, timeout=None, cancel=None):
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


def test_the_leading_node_is_refit_while_the_search_goes_on_so_a_full_budget_still_submits_a_refit(
        task, tmp_path, monkeypatch):
    def reading_refit(case: Case, task: object) -> dict:
        adapted = fake_adapter(case, task)
        return {**adapted, "code": adapted["code"] + "# CBR_REFIT\n"} if "code" in adapted else adapted

    monkeypatch.setattr(search_module, "adapt_case", reading_refit)
    monkeypatch.setattr(search_module.ensemble, "possible", lambda task, held: False)  # single nodes
    taking = Taking(monkeypatch, call=0.0, script=10.0)
    taking.now = 1000.0
    clock = Clock(120.0, start=990.0)  # the command started 10 s before the search: the bank, the model
    runs = taking.executor(executor(noisy_answers(task)))
    record = develop_search(task, DevelopConfig(iterations=50, budget=120.0), tmp_path,
                            FakeBank(solutions=[solution("first"), solution("good")]), runs, clock=clock)
    assert record.refit is not None and record.refit.status == "ok", record.refit  # the default: refit
    refits = [k for k, (_, refit) in enumerate(runs.runs) if refit]
    assert refits and refits[-1] < len(runs.runs) - 1  # the leader's refit ran while the search went on
    assert (tmp_path / "refit" / f"node-{record.best_iteration:02d}").is_dir()  # the selected node's own
    # the nodes went on to the end: no room was left there for a late refit of a 10 s fit
    assert 120.0 - record.took < REFIT_ROOM * 10.0 + ENDING and record.took <= 120.0
    assert all(r.ended <= 120.0 - ENDING for r in record.rows if r.operator != "ensemble")
    assert record.stopped.startswith("the budget of 2m spent")


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


def test_a_model_nodes_script_takes_the_cores_before_the_plain_scripts_waiting():
    from dsagent_cbr.search.parallel import Turns

    turns, order, running = Turns(), [], threading.Event()

    def take(name: str, first: bool) -> None:
        with turns.turn(first):
            order.append(name)

    with turns.turn():  # a plain script has the cores
        waiting = [threading.Thread(target=take, args=("plain", False))]
        waiting[0].start()
        time.sleep(0.1)  # the plain one waits first
        waiting.append(threading.Thread(target=take, args=("model", True)))
        waiting[1].start()
        time.sleep(0.1)
        running.set()
    for thread in waiting:
        thread.join(5)
    assert order == ["model", "plain"]


def test_a_bug_of_ours_in_a_node_ends_the_run_as_ours_never_as_completed(task, tmp_path, monkeypatch):
    """A search died of SystemError from ast.parse while nodes ran in threads, and its record then said
    "ok, completed"."""
    import json

    from dsagent_cbr.errors import InfrastructureError

    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)

    class Buggy(FakeExecutor):
        def run(self, code, folder, refit=False, timeout=None, cancel=None):
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
    ended = threading.Event()
    nodes = Search.nodes

    def then_no_time(self, *args):
        try:
            return nodes(self, *args)
        finally:
            ended.set()

    monkeypatch.setattr(Search, "nodes", then_no_time)
    monkeypatch.setattr(Tree, "blend_seconds", lambda self: 1e6 if ended.is_set() else 0.0)
    record = develop_search(task, DevelopConfig(iterations=6, budget=600.0), tmp_path,
                            FakeBank(solutions=[solution("first"), solution("good")]), executor(noisy_answers(task)))
    assert [r.operator for r in record.rows].count("ensemble") == 1  # the one at four graded nodes
    assert record.rows[-1].operator != "ensemble"
    assert record.stopped.startswith("the cap of 6 nodes reached after 6 node(s); no last blend: it needs about")
