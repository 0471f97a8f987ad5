"""What the model is shown in the search (search/model_moves.py): the tree's log, and the scripts of the
nodes a plan names. The search itself is tested in test_search.py, whose fakes these tests share."""

from __future__ import annotations

import pytest
from conftest import prepared
from support.fakes import FakeBank, FakeModel
from support.search_fakes import PLAN, executor, fake_adapter, fenced, insight, solution

from dsagent_cbr.agent.develop import DevelopConfig
from dsagent_cbr.search import operators as search_module
from dsagent_cbr.search.drafts import general_cases
from dsagent_cbr.search.loop import develop_search


@pytest.fixture(scope="module")
def task():
    return prepared("concrete-strength")


def test_the_tree_log_shows_the_best_so_far_and_its_blends_members_however_long_the_search():
    from types import SimpleNamespace

    from dsagent_cbr.agent.record import Row
    from dsagent_cbr.search.model_moves import ModelMoves

    singles = [Row(iteration=i, operator="tune", status="ok", score=10.0 + i, parent=1) for i in range(1, 31)]
    blend = Row(iteration=31, operator="ensemble", status="ok", score=5.0, members={20: 0.6, 25: 0.4})
    later = [Row(iteration=i, operator="tune", status="ok", score=50.0 + i, parent=1) for i in range(32, 40)]
    moves = ModelMoves.__new__(ModelMoves)  # only what the log reads
    moves.tree = SimpleNamespace(rows=[*singles, blend, *later], graded=lambda: [r.iteration for r in singles])
    moves.run = SimpleNamespace(best=blend, baseline=None)
    moves.describe = lambda row: f"selection {row.score}"
    log = moves.tree_log()
    assert "Node 31 (ensemble)" in log and "Node 20 (tune of node 1)" in log and "Node 25 (tune of node 1)" in log
    assert "Node 19 (tune" not in log and "other nodes not shown" in log
    assert log.endswith("The best so far: node 31.")
    wide = Row(iteration=31, operator="ensemble", status="ok", score=5.0, members={k: 0.1 for k in range(20, 30)})
    moves.run = SimpleNamespace(best=wide, baseline=None)
    assert "Node 39 (" not in moves.tree_log()  # the best and its members fill the log: no recent ones


def test_the_coder_sees_the_scripts_of_the_nodes_a_plan_names(task, tmp_path, monkeypatch):
    monkeypatch.setattr(search_module, "adapt_case", fake_adapter)
    monkeypatch.setattr(search_module, "general_cases", lambda task: general_cases(task)[:1])  # node 1, a draft
    model = FakeModel({"adapt": [fenced("good")], "rerank": ["[1]"] * 4,
                       "plan": [PLAN.format("Keep node 1's booster and nodes 97 and 98's.")] * 9,
                       "program": [fenced("trees")] * 9})
    bank = FakeBank(insights=[insight(1)], solutions=[solution("first")])
    develop_search(task, DevelopConfig(iterations=6, in_turn=True), tmp_path, bank, executor(), model=model)
    program = model.prompts[model.roles.index("program")]
    draft = (tmp_path / "step-01" / "script.py").read_text()
    assert "Node 1 (draft):" in program and draft in program  # the node it named, whole
    assert "Node 97" not in program and "Node 98" not in program  # no such nodes
    plan = model.prompts[model.roles.index("plan")]
    assert "one complete solution" in plan and "tune at most two" not in plan  # a draft's rules, not an edit's

