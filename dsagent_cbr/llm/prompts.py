"""Prompts for every role, shipped as package resources (jinja2 templates) and rendered strictly: a
missing variable and an unexpected one are both errors, so a prompt never goes out half-filled."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

ROLES = (
    "rerank",
    "plan",
    "program",
    "debug",
    "log",
    "adapt",
    "distil",
    # cbr analyze: a question about a data file, answered in a notebook (analysis/)
    "analyze_plan",
    "analyze_replan",
    "analyze_cell",
    "analyze_debug",
    "analyze_answer",
)


class PromptError(KeyError):
    pass


@cache
def _environment() -> Any:
    import jinja2

    return jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@cache
def source(role: str) -> str:
    if role not in ROLES:
        raise PromptError(f"no prompt for role {role!r}; roles: {', '.join(ROLES)}")
    return (
        resources.files("dsagent_cbr.llm")
        .joinpath("prompts", f"{role}.md")
        .read_text(encoding="utf-8")
    )


@cache
def variables(role: str) -> frozenset[str]:
    from jinja2 import meta

    return frozenset(meta.find_undeclared_variables(_environment().parse(source(role))))


def render(role: str, **values: Any) -> str:
    expected = variables(role)
    missing, unexpected = expected - set(values), set(values) - expected
    if missing:
        raise PromptError(f"prompt {role!r} needs {', '.join(sorted(missing))}")
    if unexpected:
        raise PromptError(f"prompt {role!r} takes no {', '.join(sorted(unexpected))}")
    return _environment().from_string(source(role)).render(**values)
