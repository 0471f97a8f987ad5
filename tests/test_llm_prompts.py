"""Every role's prompt renders with exactly its variables and refuses a missing or an extra one."""

from __future__ import annotations

import pytest

from dsagent_cbr.llm.prompts import ROLES, PromptError, render, source, variables


@pytest.mark.parametrize("role", ROLES)
def test_prompt_renders_with_its_variables(role):
    names = variables(role)
    assert names, f"{role} prompt takes no variables"
    values = {name: f"<<{name}-value>>" for name in names}
    text = render(role, **values)
    for name in names:
        if "{{ " + name + " }}" in source(role):  # printed; the others only switch a sentence on
            assert f"<<{name}-value>>" in text
    assert "{{" not in text and "{%" not in text


@pytest.mark.parametrize("role", ROLES)
def test_prompt_fails_on_missing_and_extra_variable(role):
    names = sorted(variables(role))
    values = {name: "x" for name in names}
    with pytest.raises(PromptError, match=names[0]):
        render(role, **{k: v for k, v in values.items() if k != names[0]})
    with pytest.raises(PromptError, match="surplus"):
        render(role, **values, surplus="y")


def test_plan_asks_for_a_simpler_step_only_after_debugging_gave_up():
    values = {n: "x" for n in variables("plan")}
    assert "simpler step" in render("plan", **{**values, "simpler": True})
    assert "simpler step" not in render("plan", **{**values, "simpler": False})


def test_prompt_structure_follows_the_method():
    plan = render("plan", **{n: "x" for n in variables("plan")})
    for part in ("Reflection", "Reasoning", "Thought", "Check", "Decision"):
        assert f"{part}:" in plan
    assert "[2] > [1] > [3]" in render("rerank", **{n: "x" for n in variables("rerank")})
    log = render("log", **{n: "x" for n in variables("log")})
    assert "Experiment Summary" in log and "Experiment Result" in log
    distil = render("distil", **{n: "x" for n in variables("distil")})
    assert distil.count("\n1.") + distil.count("\n6.") == 2


def test_unknown_role():
    with pytest.raises(PromptError):
        render("poem", text="x")
