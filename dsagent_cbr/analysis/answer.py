"""The final answer in InfiAgent-DABench's form: items written `@name[value]`, the names given by the
requested format (`@mean_close_price[mean_value], where ...`). What a reply holds is read here, and
what the format asks for and the reply lacks; answer.md and answer.json are written here too."""

from __future__ import annotations

import re
from pathlib import Path

from dsagent_cbr.files import write_json_atomic, write_text_atomic

_ITEM = re.compile(r"@(\w+)\[")
ANSWER_MD, ANSWER_JSON = "answer.md", "answer.json"


def _closing(text: str, start: int) -> int | None:
    """Where the bracket opened just before `start` closes, counting nested ones; None when it does
    not close on its own line (a value never runs over a line break)."""
    depth = 1
    for index in range(start, len(text)):
        char = text[index]
        if char == "\n":
            return None
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return index
    return None


def find_items(text: str) -> list[tuple[str, str]]:
    """Every `@name[value]` in `text`, in order. A value may hold brackets of its own (`@pair[[1, 2]]`
    gives `[1, 2]`); an item whose brackets do not balance ends at its first `]`, as DABench's
    own `@(\\w+)\\[(.*?)\\]` reads it."""
    items = []
    for match in _ITEM.finditer(text):
        end = _closing(text, match.end())
        if end is None:
            end = text.find("]", match.end())
            if end < 0 or "\n" in text[match.end() : end]:
                continue
        items.append((match.group(1), text[match.end() : end].strip()))
    return items


def placeholders(answer_format: str) -> dict[str, str]:
    """The names the format asks for, each with its placeholder value (`mean_value`), in order."""
    return dict(find_items(answer_format))


def answers_of(text: str, answer_format: str) -> list[tuple[str, str]]:
    """The reply's answer: one value per name, the last one given (a reply that restates the format
    first, or corrects itself, means its last word), the format's own placeholder not counting as a
    value. The format's names come first, in its order, then any others the reply gave."""
    asked = placeholders(answer_format)
    last: dict[str, str] = {}
    for name, value in find_items(text):
        if value and value != asked.get(name):
            last[name] = value
    ordered = [name for name in asked if name in last]
    ordered += [name for name in last if name not in asked]
    return [(name, last[name]) for name in ordered]


def missing_names(answers: list[tuple[str, str]], answer_format: str) -> list[str]:
    given = {name for name, _ in answers}
    return [name for name in placeholders(answer_format) if name not in given]


def merged(first: list[tuple[str, str]], second: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The answer asked again over the first one: its items win, the first one's fill the rest."""
    values = dict(first) | dict(second)
    names = [name for name, _ in first] + [name for name, _ in second if name not in dict(first)]
    return [(name, values[name]) for name in names]


def say_answers(answers: list[tuple[str, str]]) -> str:
    return " ".join(f"@{name}[{value}]" for name, value in answers)


def write_answer(run_dir: Path, answers: list[tuple[str, str]], text: str) -> None:
    """answer.md, the model's final text as it wrote it, and answer.json, the items read from it."""
    write_text_atomic(run_dir / ANSWER_MD, text if text.endswith("\n") or not text else text + "\n")
    write_json_atomic(
        run_dir / ANSWER_JSON, {"answers": [[name, value] for name, value in answers], "text": text}
    )
