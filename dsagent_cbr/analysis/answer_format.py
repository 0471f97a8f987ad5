"""What an answer's format asks for, read from the format itself: DABench's `@name[placeholder]`
items and the words around them. Each item's name as written, whether its value goes in quotes,
whether it is asked for only in some case ("only when p >= 0.05"), and whether the format puts one
item a line. The answer prompt is drawn from this reading, so its rules never contradict the format
they serve, and the answer is checked against it (an item asked for only in some case is never
demanded)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsagent_cbr.analysis.answer import find_items

# words that make an item's presence depend on a case; a quoted value just before them ("yes" only
# if ...) says when a value is given, not whether the item is
_CONDITION = re.compile(
    r"\bonly\s+(?:when|if|in\s+case)\b|\b(?:if|when)\s+(?:it\s+)?(?:applies|applicable)\b"
    r"|\boptional(?:ly)?\b|\bomit(?:ted)?\b|\bleave\s+(?:it|this|them)\s+out\b"
    r"|\bmay\s+be\s+left\s+out\b",
    re.IGNORECASE,
)
_QUOTED_BEFORE = re.compile(r"[\"'`\u201d]\s*$")
_LINE_BREAK = re.compile(r"\n|\\n")
_QUOTES = "\"'"


@dataclass(frozen=True)
class FormatItem:
    name: str  # as the format writes it
    placeholder: str  # what the format puts between the brackets
    quoted: bool = False  # the format writes the value in quotes
    conditional: bool = False  # the format asks for it only in some case


@dataclass(frozen=True)
class AnswerFormat:
    items: tuple[FormatItem, ...] = ()
    one_a_line: bool = False  # the format puts each item on a line of its own

    def for_prompt(self) -> dict[str, object]:
        """The analyze_answer prompt's view: each item as the format writes it, those whose value
        goes in quotes, those asked for only in some case, and the layout."""
        shown = {item: f"@{item.name}[{item.placeholder}]" for item in self.items}
        return {
            "items": list(shown.values()),
            "quoted": [shown[item] for item in self.items if item.quoted],
            "conditional": [shown[item] for item in self.items if item.conditional],
            "one_a_line": self.one_a_line,
        }

    @property
    def names(self) -> list[str]:
        return [item.name for item in self.items]

    @property
    def required(self) -> list[str]:
        """The names an answer must give: every item but those asked for only in some case."""
        return [item.name for item in self.items if not item.conditional]


def read_format(text: str) -> AnswerFormat:
    """The format's items in order, a name given twice counting once (its first placeholder)."""
    placeholders: dict[str, str] = {}
    for name, placeholder in find_items(text):
        placeholders.setdefault(name, placeholder)
    conditional = _conditional(text, placeholders)
    items = tuple(
        FormatItem(name, placeholder, _quoted(placeholder), name in conditional)
        for name, placeholder in placeholders.items()
    )
    return AnswerFormat(items, _one_a_line(text, list(placeholders)))


def _quoted(placeholder: str) -> bool:
    return len(placeholder) >= 2 and placeholder[0] == placeholder[-1] in _QUOTES


def _one_a_line(text: str, names: list[str]) -> bool:
    """Whether a line break (or a written `\\n`) stands between every two items of the format."""
    starts = [text.find(f"@{name}[") for name in names]
    return len(starts) > 1 and all(
        _LINE_BREAK.search(text, before, after)
        for before, after in zip(starts, starts[1:], strict=False)
    )


def _mentions(text: str, placeholders: dict[str, str]) -> list[tuple[int, str]]:
    """Where the format names each item: `@name[`, the name as a word, its placeholder in quotes, or
    its placeholder as a word when it reads as an identifier (`r_value`, not `value`)."""
    found = []
    for name, placeholder in placeholders.items():
        bare = placeholder.strip(_QUOTES)
        forms = [re.escape(f"@{name}["), rf"\b{re.escape(name)}\b"]
        if bare:
            forms.append(rf"[{_QUOTES}]{re.escape(bare)}[{_QUOTES}]")
            if re.fullmatch(r"\w*[_\d]\w*", bare):
                forms.append(rf"\b{re.escape(bare)}\b")
        found += [(match.start(), name) for match in re.finditer("|".join(forms), text)]
    return sorted(found)


def _conditional(text: str, placeholders: dict[str, str]) -> set[str]:
    """The items a condition's words belong to: the item the format last named before them, or,
    when it named none yet, the first it names after them."""
    mentions = _mentions(text, placeholders)
    items: set[str] = set()
    for match in _CONDITION.finditer(text):
        if _QUOTED_BEFORE.search(text, 0, match.start()):
            continue
        before = [name for at, name in mentions if at < match.start()]
        after = [name for at, name in mentions if at >= match.end()]
        if before or after:
            items.add(before[-1] if before else after[0])
    return items


def missing_names(answers: list[tuple[str, str]], answer_format: str) -> list[str]:
    """The names the format asks for in every case that the answer lacks."""
    given = {name for name, _ in answers}
    return [name for name in read_format(answer_format).required if name not in given]
