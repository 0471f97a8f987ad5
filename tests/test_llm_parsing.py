"""Reply parsers that must survive small models, and strict prompt rendering."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsagent_cbr.llm.parsing import ParseError, extract_code, parse_debug, parse_plan, parse_ranking
from dsagent_cbr.llm.prompts import ROLES, PromptError, render, variables


@given(n=st.integers(1, 12), ids=st.lists(st.integers(-3, 20), max_size=30),
       sep=st.sampled_from([" > ", ">", " >  ", ", ", "\n"]), noise=st.text(max_size=20))
def test_ranking_is_always_a_permutation_honouring_valid_ids(n, ids, sep, noise):
    reply = noise.replace("[", "(") + sep.join(f"[{i}]" for i in ids)
    valid = list(dict.fromkeys(i for i in ids if 1 <= i <= n))
    if not valid:
        with pytest.raises(ParseError):
            parse_ranking(reply, n)
        return
    order = parse_ranking(reply, n)
    assert sorted(order) == list(range(1, n + 1))
    assert order[: len(valid)] == valid
    assert order[len(valid):] == [i for i in range(1, n + 1) if i not in valid]  # missing: retrieval order


def test_ranking_spacing_and_words():
    assert parse_ranking("Ranking: [ 3 ]>[1] > [3] and [7]", 3) == [3, 1, 2]


CODE = "import numpy as np\n\ndef train_model(X, y, Xv, yv):\n    return None\n"


@pytest.mark.parametrize("reply", [
    f"Here you go:\n```python\n{CODE}```\nDone.",
    f"```py\n{CODE}```",
    f"```\n{CODE}```",
    f"Sure!\n```python\n{CODE}",                                   # unterminated fence
    f"```python\nprint(1)\n```\nand the script:\n```python\n{CODE}```",   # several blocks: the longest
    CODE,                                                          # no fence at all
])
def test_code_fences(reply):
    assert extract_code(reply).strip() == CODE.strip()


def test_no_code_is_a_typed_error():
    with pytest.raises(ParseError) as err:
        extract_code("I would use a random forest.")
    assert err.value.role == "program"


def test_plan_sections_and_fallbacks():
    plan = parse_plan("**Reflection:** nothing yet\n## Reasoning: case uses GBM\nThought: try it\nCheck: ok\n"
                      "DECISION: Replace the random guess with LightGBM.")
    assert plan["decision"] == "Replace the random guess with LightGBM." and plan["reasoning"] == "case uses GBM"
    assert parse_plan("Use gradient boosting with 500 trees.")["decision"].startswith("Use gradient")
    with pytest.raises(ParseError):
        parse_plan("Reflection: hmm\nThought: maybe")


def test_debug_reflection_then_code():
    out = parse_debug(f"The import was missing.\n```python\n{CODE}```")
    assert out["reflection"] == "The import was missing." and out["code"].strip() == CODE.strip()


@pytest.mark.parametrize("role", ROLES)
def test_every_prompt_renders_and_is_strict(role):
    names = variables(role)
    assert names
    text = render(role, **{n: f"<{n}>" for n in names})
    assert all(f"<{n}>" in text for n in names)
    missing = sorted(names)[0]
    with pytest.raises(PromptError, match=missing):
        render(role, **{n: "x" for n in names if n != missing})
    with pytest.raises(PromptError, match="takes no"):
        render(role, **{n: "x" for n in names}, surplus="x")
