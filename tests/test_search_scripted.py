"""The search with a model whose replies are good scripts (the task's reference, benchmarks/references/),
in the real sandbox on a real task: what a capable model is shown and whether its work is used."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, prepared
from support.fakes import FakeBank, FakeModel

from dsagent_cbr.agent.develop import DevelopConfig
from dsagent_cbr.search import operators, policy
from dsagent_cbr.search.drafts import general_cases
from dsagent_cbr.search.loop import develop_search

PLAN = "Reflection: the draft stands.\nDecision: One-hot the categories and choose between logistic regression and " \
       "shallow boosted trees on the validation rows."


@pytest.mark.slow
def test_a_model_writing_good_scripts_is_shown_its_parent_and_its_best_node_is_selected(tmp_path, monkeypatch):
    monkeypatch.setattr(operators, "general_cases", lambda task: general_cases(task)[:1])  # one draft, then the model
    monkeypatch.setattr(policy, "PLANS", 1)
    reference = (REPO / "benchmarks" / "references" / "smoke-ban.py").read_text()
    model = FakeModel({"adapt": [f"```python\n{reference}```"], "plan": [PLAN] * 4,
                       "program": [f"```python\n{reference}```"] * 4})
    task = prepared("smoke-ban")
    budget = 600.0
    record = develop_search(task, DevelopConfig(iterations=5, budget=budget, cbr=False, in_turn=True), tmp_path,
                            FakeBank(), model=model)
    operators_used = [r.operator for r in record.rows]
    assert operators_used[:3] == ["draft", "adapt", "plan"] and "improve" in operators_used, operators_used
    plan, improve = record.rows[2], next(r for r in record.rows if r.operator == "improve")
    assert record.rows[1].status == "ok" and plan.status == "ok" and improve.parent in (1, 2, 3)
    improve_prompt = model.prompts[max(i for i, r in enumerate(model.roles) if r == "plan")]
    parent = (tmp_path / record.rows[improve.parent - 1].script).read_text()
    assert parent in improve_prompt and "Current script" in improve_prompt  # its parent's own script, to change
    assert f"Node {plan.iteration} (plan): Logistic regression" in improve_prompt  # described by what it trains
    singles = [r for r in record.rows if r.operator != "ensemble" and r.score is not None]
    best_single = max(singles, key=lambda r: r.score)
    assert record.retained and record.retained[0]["iteration"] == best_single.iteration
    if best_single.operator in ("adapt", "plan", "improve") and record.rows[-1].operator != "ensemble":
        assert record.best_iteration == best_single.iteration  # the model's node is the run's solution
    assert all(budget - r.started >= 20.0 for r in record.rows if r.operator != "ensemble")
    assert Path(record.submission).is_file()
