"""Grading DABench responses, and the benchmark's three figures.

The rule follows InfiAgent-DABench's own evaluation script, examples/DA-Agent/eval_closed_form.py in
github.com/InfiAgent/InfiAgent (commit d02d18a, Dec 2024); the code here is ours:

- answers are every match of `@(\\w+)\\[(.*?)\\]` in the response: a name of word characters, then the
  shortest text up to the first `]`, on one line (no DOTALL). Nothing is stripped. A name given twice
  keeps its last value (they build a dict from the matches); names the label lacks are ignored.
- a label is a dict too: a name listed twice in a label counts once, with its last value.
- a value is right when it equals the label's as text, or else when both read as Python floats less
  than 1e-6 apart (so "570.680" and " 570.68" are right for 570.68, while " no" is wrong for "no").
  A name the response lacks is wrong.
- accuracy by question (ABQ): the fraction of questions with every sub-answer right; proportional
  accuracy by sub-question (PASQ): the mean over questions of the fraction of its sub-answers right;
  uniform accuracy by sub-question (UASQ): right sub-answers over all sub-answers, pooled.
- concepts: a question counts once in each of its concepts (their analyze_concepts_accuracy).

One departure: their script drops a question whose response is empty from every figure (it only grades
responses that are truthy). We count such a question with all its sub-answers wrong, so that an agent
that fails to answer scores lower, and the denominator is always the questions asked."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dsagent_cbr.analysis.answer import dabench_items
from dsagent_cbr.analysis.dabench_data import Label, Question

TOLERANCE = 1e-6
LEVELS = ("easy", "medium", "hard")


@dataclass(frozen=True)
class Graded:
    """One question's grade: one flag per distinct name of its label."""

    id: int
    level: str
    concepts: tuple[str, ...]
    right: tuple[bool, ...]

    @property
    def all_right(self) -> bool:
        return all(self.right)


def extract_answers(text: str) -> dict[str, str]:
    """The response's @name[value] answers; a name given twice keeps its last value."""
    return dict(dabench_items(text or ""))


def is_right(value: str | None, expected: str) -> bool:
    if value is None:
        return False
    if value == expected:
        return True
    try:
        return abs(float(value) - float(expected)) < TOLERANCE
    except (TypeError, ValueError, OverflowError):
        return False


def grade(answers: dict[str, str], label: Label) -> list[bool]:
    """One flag per distinct name of the label, in the order the names first appear."""
    expected = dict(label)  # as theirs: a name listed twice counts once, with its last value
    return [is_right(answers.get(name), value) for name, value in expected.items()]


def grade_response(question: Question, response: str, label: Label) -> Graded:
    right = grade(extract_answers(response), label)
    return Graded(question.id, question.level, question.concepts, tuple(right))


def _three(graded: list[Graded]) -> dict[str, float | int]:
    """ABQ, PASQ and UASQ as fractions, with the counts they come from (0 for no questions)."""
    questions = len(graded)
    subs = sum(len(g.right) for g in graded)
    right_subs = sum(sum(g.right) for g in graded)
    return {
        "questions": questions,
        "sub_answers": subs,
        "ABQ": sum(g.all_right for g in graded) / questions if questions else 0.0,
        "PASQ": (
            sum(sum(g.right) / len(g.right) for g in graded if g.right) / questions
            if questions
            else 0.0
        ),
        "UASQ": right_subs / subs if subs else 0.0,
    }


def _grouped(graded: Iterable[Graded], keys_of) -> dict[str, list[Graded]]:
    groups: dict[str, list[Graded]] = {}
    for g in graded:
        for key in keys_of(g):
            groups.setdefault(key, []).append(g)
    return groups


def figures(graded: list[Graded]) -> dict:
    """The three figures overall, by level (easy, medium, hard first, any other after) and by
    concept (a question with several concepts counts in each)."""
    by_level = _grouped(graded, lambda g: (g.level,))
    levels = [lv for lv in LEVELS if lv in by_level] + sorted(set(by_level) - set(LEVELS))
    by_concept = _grouped(graded, lambda g: g.concepts)
    return {
        "overall": _three(graded),
        "by_level": {lv: _three(by_level[lv]) for lv in levels},
        "by_concept": {c: _three(by_concept[c]) for c in sorted(by_concept)},
    }
