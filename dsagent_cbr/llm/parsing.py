"""Parsers for model replies that survive small models: code fences of every shape, rank
permutations with noise, the planner's labelled sections, the debugger's reflection and code.
A reply that cannot be used raises ParseError, one typed error the agent can act on."""

from __future__ import annotations

import re

from dsagent_cbr.python_syntax import parse as parse_python


class ParseError(ValueError):
    def __init__(self, role: str, reason: str, raw: str = "") -> None:
        super().__init__(f"{role}: {reason}")
        self.role = role
        self.reason = reason
        self.raw = raw


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_HINTS = ("def ", "import ", "print(", "return ", " = ", "for ", "if __name__")


def _looks_like_python(text: str) -> bool:
    return any(h in text for h in _CODE_HINTS)


def _parses(text: str) -> bool:
    try:
        parse_python(text)
    # a null byte is a ValueError before Python 3.12; a reply nested past the parser's stack (200 kB
    # of unary minus, say) is a MemoryError or RecursionError of the parser's, not of the host
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def fenced_blocks(reply: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block, as `_FENCE.findall` reads them, in time linear in the
    reply: the pattern alone is quadratic where fences have no line break after them ("```" * 30000,
    90 kB, took 4 s). A fence past the last line break opens no block, so none is tried there; one
    before it always does."""
    last = reply.rfind("\n")
    blocks: list[tuple[str, str]] = []
    at = 0
    while 0 <= (opened := reply.find("```", at)) < last:
        match = _FENCE.match(reply, opened)
        if match is None:
            break
        blocks.append((match.group(1), match.group(2)))
        at = match.end()
    return blocks


def extract_code(reply: str, role: str = "program") -> str:
    """The script in a reply: the longest python-looking fenced block (an unterminated fence runs to
    the end), else the reply itself when it parses as Python."""
    blocks = [(lang.lower(), body.strip("\n")) for lang, body in fenced_blocks(reply)]
    candidates = [b for lang, b in blocks if lang in ("python", "py", "python3", "") and b.strip()]
    candidates = [b for b in candidates if _looks_like_python(b)] or candidates
    if candidates:
        # Prefer blocks that parse; among them the longest (small models add fragments around the script).
        parsing = [b for b in candidates if _parses(b)]
        return max(parsing or candidates, key=len).rstrip() + "\n"
    stripped = reply.strip()
    if stripped and _looks_like_python(stripped) and _parses(stripped):
        return stripped + "\n"
    raise ParseError(role, "the reply holds no Python code", reply)


def parse_ranking(reply: str, n: int) -> list[int]:
    """A permutation of 1..n from '[2] > [1] > [3]': duplicates and unknown ids dropped, missing ids
    appended in retrieval order. Raises ParseError when the reply names no valid id at all."""
    seen: list[int] = []
    for match in re.findall(r"\[\s*(\d+)\s*\]", reply):
        i = int(match)
        if 1 <= i <= n and i not in seen:
            seen.append(i)
    if not seen and n > 0:
        raise ParseError("rerank", f"no case id between [1] and [{n}] in the reply", reply)
    return seen + [i for i in range(1, n + 1) if i not in seen]


PLAN_SECTIONS = ("reflection", "reasoning", "thought", "check", "decision")
_HEADER = re.compile(
    r"^[ \t#*>-]*(" + "|".join(PLAN_SECTIONS) + r")[ \t*]*:?[ \t*]*", re.IGNORECASE | re.MULTILINE
)


def parse_sections(reply: str) -> dict[str, str]:
    marks = list(_HEADER.finditer(reply))
    sections: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(reply)
        body = reply[m.end() : end].strip().strip("*").strip()
        if body:
            sections[m.group(1).lower()] = body
    return sections


def parse_plan(reply: str) -> dict[str, str]:
    """The planner's Reflection/Reasoning/Thought/Check/Decision. Decision is required; a reply with no
    headers at all but some prose is taken as the decision itself (small models skip the format)."""
    sections = parse_sections(reply)
    if "decision" not in sections:
        prose = reply.strip()
        if sections or not prose or len(prose) < 10:
            raise ParseError("plan", "the reply has no Decision section", reply)
        sections["decision"] = prose[-1500:]
    return sections


def parse_debug(reply: str) -> dict[str, str]:
    """The debugger's reflection (the text before the code) and its full fixed script."""
    code = extract_code(reply, role="debug")
    fence = reply.find("```")
    reflection = reply[:fence].strip() if fence > 0 else ""
    return {"reflection": reflection, "code": code}


def parse_log(reply: str) -> str:
    """The logger's entry for the running log: any non-empty text (the two labels are asked for, but a
    small model's plain summary is still a summary)."""
    text = reply.strip()
    if not text:
        raise ParseError("log", "the reply is empty", reply)
    return text
