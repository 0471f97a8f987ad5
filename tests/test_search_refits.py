"""The search's refits (search/refits.py) with in-process fakes of the bank, the adapter and the executor:
the leading nodes refit while the search goes on, in the room the policy keeps; a blend's members refit,
the light ones at the end, and blended; a member whose refit failed submitted as its first fit; the floor
refit before the final choice may take it (the loop itself is test_search.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
from conftest import prepared
from support.fakes import FakeBank, Graded
from support.search_fakes import (
    Taking,
    boosters,
    executor,
    fake_adapter,
    slow_blends_once_the_nodes_end,
    solution,
)
from support.workspace_rows import noisy_answers

from dsagent_cbr.agent.develop import DevelopConfig
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.clock import Clock
from dsagent_cbr.search import operators as search_module
from dsagent_cbr.search import tree as tree_module
from dsagent_cbr.search.drafts import FLOOR_CASE
from dsagent_cbr.search.loop import Search, develop_search
from dsagent_cbr.search.policy import ENDING, REFIT_ROOM
from dsagent_cbr.search.tree import Tree


@pytest.fixture(scope="module")
def task():
    return prepared("concrete-strength")


def reading_refit(case: Case, task: object) -> dict:
    """The fake adapter's script, reading the refit's variable as the drafts do."""
    adapted = fake_adapter(case, task)
    return {**adapted, "code": adapted["code"] + "# CBR_REFIT\n"} if "code" in adapted else adapted


def test_a_refit_blend_refits_each_member_and_blends_their_test_predictions(task, tmp_path, monkeypatch):
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


def test_a_blend_submits_a_member_s_first_fit_where_its_refit_failed_and_names_it(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", reading_refit)
    runs, lost = executor(noisy_answers(task)), []
    run = runs.run

    def losing_the_second_refit(code, folder, refit=False, *args, **kwargs):
        result = run(code, folder, refit, *args, **kwargs)
        if refit and sum(r for _, r in runs.runs) == 2:
            lost.append(int(next(p for p in Path(folder).parts if p.startswith("node-"))[5:]))
            return dataclasses.replace(result, status="error", error="lost")
        return result

    runs.run = losing_the_second_refit
    record = develop_search(task, DevelopConfig(iterations=4, refit=True), tmp_path,
                            FakeBank(solutions=[solution("first"), solution("good")]), runs)
    best = next(r for r in record.rows if r.iteration == record.best_iteration)
    assert best.operator == "ensemble" and len(best.members) >= 2 and len(lost) == 1
    assert record.refit.status == "ok" and record.refit.first_fits == lost
    assert record.refit.share == round(1 - best.members[lost[0]] / sum(best.members.values()), 3)
    assert f"node {lost[0]} ({best.members[lost[0]]:g}) first fit" in record.refit.agreement


def test_the_end_refits_a_blend_s_light_members_too(task, tmp_path, monkeypatch):
    """The search refits members weighing MIN_WEIGHT or more while it goes on; at the end, with time,
    the lighter ones too: the submission learns from every labelled row where it can."""
    monkeypatch.setattr(search_module, "adapt_case", reading_refit)
    monkeypatch.setattr(tree_module, "MIN_WEIGHT", 2.0)  # no member leads
    runs = executor(noisy_answers(task))
    record = develop_search(task, DevelopConfig(iterations=4, refit=True), tmp_path,
                            FakeBank(solutions=[solution("first"), solution("good")]), runs)
    best = next(r for r in record.rows if r.iteration == record.best_iteration)
    assert best.operator == "ensemble" and record.refit.status == "ok" and record.refit.share == 1
    assert record.refit.first_fits == [] and sum(r for _, r in runs.runs) == len(best.members)


def test_the_leading_node_is_refit_while_the_search_goes_on_so_a_full_budget_still_submits_a_refit(
        task, tmp_path, monkeypatch):
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


def test_the_late_refit_of_a_single_node_keeps_no_time_for_a_blend_of_refits(task, tmp_path, monkeypatch):
    """The selected node's own refit is the submission: no blend of refits follows it (a one-minute run on
    1.4 million rows skipped the refit of a 6-second fit with 19 s left, 4 of them kept for that blend)."""
    monkeypatch.setattr(search_module, "adapt_case", reading_refit)
    monkeypatch.setattr(search_module.ensemble, "possible", lambda task, held: False)  # single nodes
    slow_blends_once_the_nodes_end(monkeypatch)
    runs = executor(noisy_answers(task))
    record = develop_search(task, DevelopConfig(iterations=1, budget=600.0), tmp_path, FakeBank(), runs)
    assert record.refit is not None and record.refit.status == "ok", record.refit
    assert [refit for _, refit in runs.runs] == [False, False, True]  # the starter, the node, its late refit


def test_a_leading_node_s_refit_that_fits_only_without_the_blends_is_made_instead_of_another_draft(
        task, tmp_path, monkeypatch):
    """The first draft leads with 30 s left: its refit needs 20 s and the ending 5, the two blends to come
    4 s each. The refit goes first: no second draft starts and the refit is submitted (the blends' room
    went to a second draft before, and the refit was then skipped)."""
    monkeypatch.setattr(search_module, "adapt_case", reading_refit)
    monkeypatch.setattr(search_module, "general_cases", boosters)  # two drafts; the first leads (rmse)
    monkeypatch.setattr(Tree, "blend_seconds", lambda self: 4.0 if self.singles() else 0.0)
    taking = Taking(monkeypatch, call=0.0, script=10.0)
    taking.now = 1000.0
    runs = taking.executor(executor(noisy_answers(task)))
    record = develop_search(task, DevelopConfig(iterations=50, budget=50.0), tmp_path, FakeBank(), runs,
                            clock=Clock(50.0, start=1000.0))
    assert [r.operator for r in record.rows] == ["draft"]
    assert record.refit is not None and record.refit.status == "ok", record.refit
    assert [refit for _, refit in runs.runs] == [False, False, True]  # the starter, the draft, its refit


def test_the_run_s_estimate_does_not_take_the_room_kept_for_the_refit(task, tmp_path, monkeypatch):
    """As above, the first draft leads with 30 s left and its refit keeps its room; the estimate of how
    sure the selection is takes 8 s (on 1.4 million rows it took 2.5 s, and a refit kept 25 s for was
    skipped with 23 s left). It runs after the refit, which is submitted."""
    from dsagent_cbr.agent import run as run_module

    monkeypatch.setattr(search_module, "adapt_case", reading_refit)
    monkeypatch.setattr(search_module, "general_cases", boosters)
    monkeypatch.setattr(Tree, "blend_seconds", lambda self: 4.0 if self.singles() else 0.0)
    taking = Taking(monkeypatch, call=0.0, script=10.0)
    taking.now = 1000.0
    order = []

    def slow_estimate(*args, **kwargs):
        taking.now += 8.0
        order.append("estimate")

    monkeypatch.setattr(run_module, "estimate", slow_estimate)
    runs = taking.executor(executor(noisy_answers(task)))
    record = develop_search(task, DevelopConfig(iterations=50, budget=50.0), tmp_path, FakeBank(), runs,
                            clock=Clock(50.0, start=1000.0))
    assert record.refit is not None and record.refit.status == "ok", record.refit
    assert order == ["estimate"] and runs.runs[-1][1]  # the refit ran, then the estimate


def test_a_leading_node_is_refit_in_the_room_the_policy_keeps_for_it_and_the_search_goes_on(
        task, tmp_path, monkeypatch):
    """The first draft took 20 s and leads with 47 s left; the policy keeps room for its refit (a deadline
    that leaves it 20 s to train, as at the run's end). Asked for 1.5 times that during the search, the
    refit waited for the end and the search stopped with 47 s left after one node (as a five-minute run on
    flights-late stopped with 38 s left and its blend's main member not refit). It is refit at once, and
    the second draft and a blend follow."""
    monkeypatch.setattr(search_module, "adapt_case", reading_refit)
    monkeypatch.setattr(search_module, "general_cases", boosters)
    monkeypatch.setattr(Tree, "blend_seconds", lambda self: 4.0 if self.singles() else 0.0)
    taking = Taking(monkeypatch, call=0.0, script=5.0, by_marker={"# general\n": 20.0})
    taking.now = 1000.0
    runs = taking.executor(executor(noisy_answers(task)))
    record = develop_search(task, DevelopConfig(iterations=3, budget=72.0), tmp_path, FakeBank(), runs,
                            clock=Clock(72.0, start=1000.0))
    assert [r.operator for r in record.rows] == ["draft", "draft", "ensemble"]
    assert [refit for _, refit in runs.runs[:3]] == [False, False, True]  # the starter, the draft, its refit
    assert record.refit is not None and record.refit.status == "ok", record.refit


def test_the_floor_is_refit_during_the_search_once_the_drafts_and_the_leader_are(task, tmp_path, monkeypatch):
    """The final choice may take the floor over the last blend (submitted_choice), which is known only once
    the last blend is made; its refit, LightGBM's defaults on every labelled row, is made during the search,
    after the leader's, so that it is ready then."""
    general = boosters(task)[0]
    floor = next(c for c in search_module.general_cases(task) if c.task_name == FLOOR_CASE)
    monkeypatch.setattr(search_module, "adapt_case", reading_refit)
    monkeypatch.setattr(search_module, "general_cases", lambda task: [general, floor])
    monkeypatch.setattr(Search, "last_ensemble", lambda self, t: "")  # a blend would have its members refit late
    runs = executor(noisy_answers(task))
    runs.grades = {f"# {FLOOR_CASE}": Graded(selection=6.0, test=6.5), **runs.grades}  # behind the draft (5.0)
    develop_search(task, DevelopConfig(iterations=2), tmp_path, FakeBank(), runs)
    refit = [code.split("\n")[0] for code, refit in runs.runs if refit]
    assert refit == ["import os  # general", f"import os  # {FLOOR_CASE}"]  # the leader's, then the floor's
