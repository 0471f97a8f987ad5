"""The final answer in InfiAgent-DABench's form: items written `@name[value]`, the names given by the
requested format (`@mean_close_price[mean_value], where ...`). What a reply holds is read here, and
what the format asks for and the reply lacks; answer.md and answer.json are written here too."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from dsagent_cbr.files import write_json_atomic, write_text_atomic

_ITEM = re.compile(r"@(\w+)\[")
ANSWER_MD, ANSWER_JSON = "answer.md", "answer.json"
# what is read back of answer.md: it holds client.MAX_REPLY_CHARS at most, 4 bytes each at most
ANSWER_BYTES = 2 * 2**20


class _Ahead:
    """Where `char` next appears at or after a position, for positions that only grow: each stretch
    of the text is searched once. A search from every item was quadratic in a reply the model
    controls (`"@x[" * 30000`, 90 kB, took minutes); this keeps reading a reply linear in its
    length."""

    def __init__(self, text: str, char: str) -> None:
        self.text, self.char, self.at = text, char, -1

    def __call__(self, start: int) -> int:
        """The position, or the text's length when there is none."""
        if self.at < start:
            found = self.text.find(self.char, start)
            self.at = len(self.text) if found < 0 else found
        return self.at


def _first_close(text: str) -> Callable[[int], int | None]:
    """Where the first `]` after a position is, if it comes before the line ends (a value never runs
    over a line break); positions must only grow."""
    close, newline = _Ahead(text, "]"), _Ahead(text, "\n")

    def first(start: int) -> int | None:
        end = close(start)
        return end if end < newline(start) else None

    return first


def _matching(text: str) -> dict[int, int]:
    """Each `[` that closes on its own line, and where: one pass, a stack of the open ones."""
    pairs: dict[int, int] = {}
    opened: list[int] = []
    for index, char in enumerate(text):
        if char == "[":
            opened.append(index)
        elif char == "]" and opened:
            pairs[opened.pop()] = index
        elif char == "\n":
            opened.clear()
    return pairs


def find_items(text: str) -> list[tuple[str, str]]:
    """Every `@name[value]` in `text`, in order. A value may hold brackets of its own (`@pair[[1, 2]]`
    gives `[1, 2]`); an item whose brackets do not balance ends at its first `]`, as DABench's
    own `@(\\w+)\\[(.*?)\\]` reads it."""
    pairs, first_close = _matching(text), _first_close(text)
    items = []
    for match in _ITEM.finditer(text):
        end = pairs.get(match.end() - 1)
        if end is None:
            end = first_close(match.end())
            if end is None:
                continue
        items.append((match.group(1), text[match.end() : end].strip()))
    return items


def dabench_items(text: str) -> list[tuple[str, str]]:
    """What DABench's `re.findall(r"@(\\w+)\\[(.*?)\\]", text)` finds, in linear time: each item
    ends at its first `]` on its line, and the next is looked for after it. The pattern itself is
    quadratic where items never close."""
    first_close = _first_close(text)
    items, at = [], 0
    while match := _ITEM.search(text, at):
        end = first_close(match.end())
        if end is None:  # no item starts here; none can start inside `@name[` either
            at = match.end()
            continue
        items.append((match.group(1), text[match.end() : end]))
        at = end + 1
    return items


def placeholders(answer_format: str) -> dict[str, str]:
    """The names the format asks for, each with its placeholder value (`mean_value`), in order."""
    return dict(find_items(answer_format))


def answers_of(text: str, answer_format: str) -> list[tuple[str, str]]:
    """The reply's answer: one value per name, the last one given (a reply that restates the format
    first, or corrects itself, means its last word), the format's own placeholder not counting as a
    value. An empty value is one (`@outliers[]`: none were found). The format's names come first, in
    its order, then any others the reply gave."""
    asked = placeholders(answer_format)
    last: dict[str, str] = {}
    for name, value in find_items(text):
        if value != asked.get(name):
            last[name] = value
    ordered = [name for name in asked if name in last]
    ordered += [name for name in last if name not in asked]
    return [(name, last[name]) for name in ordered]


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
