"""Reply parsers against the shapes small models really produce: fences of every kind, noisy
rankings, loose planner headers, debugger replies."""

from __future__ import annotations

import ast
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsagent_cbr.llm.parsing import (
    ParseError,
    extract_code,
    fenced_blocks,
    parse_debug,
    parse_plan,
    parse_ranking,
)

SCRIPT = "import numpy as np\n\n\ndef train_model(X, y):\n    return np.mean(y)\n"


@pytest.mark.parametrize("reply", [
    f"Here it is:\n```python\n{SCRIPT}```\nDone.",
    f"```py\n{SCRIPT}```",
    f"```\n{SCRIPT}```",
    f"```Python\n{SCRIPT}```",
    f"Sure!\n```python\n{SCRIPT}",  # unterminated: runs to the end
    SCRIPT,  # no fence at all
])
def test_code_fences(reply):
    assert extract_code(reply) == SCRIPT


def test_several_blocks_pick_the_longest_python():
    reply = ("Install first:\n```bash\npip install numpy lightgbm scikit-learn xgboost pandas\n```\n"
             "A fragment:\n```python\nx = 1\n```\nThe script:\n```python\n" + SCRIPT + "```\n"
             "Output:\n```\nValidation mae: 0.3\n```")
    assert extract_code(reply) == SCRIPT


# the one-pattern reading of fenced blocks, which fenced_blocks must keep to
FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


@given(st.text(alphabet="`py \nx=1", max_size=60))
def test_blocks_are_read_exactly_as_the_one_pattern_reads_them(reply):
    assert fenced_blocks(reply) == FENCE.findall(reply)


@pytest.mark.parametrize("reply", ["```" * 350_000, "```x" * 260_000, "```python\nx = " + "-" * 200_000 + "1\n```",
                                   "```python\nimport a\nx = " + "(" * 100_000 + "\n```"],
                         ids=["fences", "fences and words", "deep unary", "deep brackets"])
def test_a_hostile_megabyte_reply_is_read_quickly_and_fails_only_as_parse_error(reply):
    """The one pattern was quadratic where fences have no line after them ("```" * 30000 took 4 s), and
    a block nested past what Python's parser takes raised MemoryError or RecursionError: the block is
    then a script that does not parse (the kernel says so), no error of cbr's."""
    start = time.perf_counter()
    try:
        assert extract_code(reply).startswith(("x = ", "import a"))
    except ParseError:
        assert reply.startswith("```x") or reply == "```" * 350_000
    assert time.perf_counter() - start < 1.0


def test_prose_only_raises_typed_error():
    with pytest.raises(ParseError) as info:
        extract_code("I cannot help with that request.", role="program")
    assert info.value.role == "program" and "no Python" in info.value.reason
    assert info.value.raw == "I cannot help with that request."


@pytest.mark.parametrize("reply,expected", [
    ("[2] > [1] > [3]", [2, 1, 3]),
    ("[ 3 ]>[1]", [3, 1, 2]),
    ("The ranking is: [2] > [2] > [9] > [1]", [2, 1, 3]),
    ("[3]", [3, 1, 2]),
])
def test_ranking_examples(reply, expected):
    assert parse_ranking(reply, 3) == expected


def test_ranking_without_ids_raises():
    with pytest.raises(ParseError, match="rerank"):
        parse_ranking("They are all useful.", 3)


@given(n=st.integers(1, 12), ids=st.lists(st.integers(-3, 20), max_size=30),
       sep=st.sampled_from([" > ", ">", ", ", " then ", "\n"]))
def test_ranking_is_always_a_permutation_honouring_given_order(n, ids, sep):
    reply = sep.join(f"[{i}]" for i in ids)
    valid = list(dict.fromkeys(i for i in ids if 1 <= i <= n))
    if not valid:
        with pytest.raises(ParseError):
            parse_ranking(reply, n)
        return
    order = parse_ranking(reply, n)
    assert sorted(order) == list(range(1, n + 1))
    assert order[: len(valid)] == valid
    rest = order[len(valid):]
    assert rest == sorted(rest)  # missing ids follow in retrieval order


def test_plan_sections_case_insensitive_and_decorated():
    reply = ("**REFLECTION:** baseline only.\n## reasoning: the case uses gradient boosting\n"
             "Thought - try LightGBM\ncheck: single step, fine\n**Decision**: Replace the model with LightGBM.")
    plan = parse_plan(reply)
    assert plan["reflection"] == "baseline only."
    assert plan["decision"] == "Replace the model with LightGBM."
    assert set(plan) == {"reflection", "reasoning", "thought", "check", "decision"}


def test_plan_missing_sections_tolerated_but_decision_required():
    assert parse_plan("Thought: maybe scale\nDecision: standardise the features")["decision"] == \
        "standardise the features"
    with pytest.raises(ParseError, match="Decision"):
        parse_plan("Reflection: nothing yet.\nThought: something")


def test_plan_without_headers_falls_back_to_prose():
    assert parse_plan("Use a random forest with 200 trees.")["decision"] == "Use a random forest with 200 trees."
    with pytest.raises(ParseError):
        parse_plan("   ")


def test_debug_reflection_then_code():
    reply = f"The error comes from a missing import of numpy.\n```python\n{SCRIPT}```"
    out = parse_debug(reply)
    assert out["reflection"] == "The error comes from a missing import of numpy."
    assert out["code"] == SCRIPT and ast.parse(out["code"])
    with pytest.raises(ParseError) as info:
        parse_debug("I think the data is wrong.")
    assert info.value.role == "debug"
