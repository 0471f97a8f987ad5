"""Prompts for every role, shipped as package resources and rendered with strict variables: a
missing variable and an unexpected one are both errors, so a prompt never goes out half-filled."""

from __future__ import annotations

import string
from functools import cache
from importlib import resources
from typing import Any

ROLES = ("rerank", "plan", "program", "debug", "log", "adapt", "distil")


class PromptError(KeyError):
    pass


@cache
def template(role: str) -> str:
    if role not in ROLES:
        raise PromptError(f"no prompt for role {role!r}; roles: {', '.join(ROLES)}")
    return resources.files("dsagent_cbr.llm").joinpath("prompts", f"{role}.md").read_text(encoding="utf-8")


def variables(role: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template(role)) if field}


def render(role: str, **values: Any) -> str:
    expected = variables(role)
    missing, unexpected = expected - set(values), set(values) - expected
    if missing:
        raise PromptError(f"prompt {role!r} needs {', '.join(sorted(missing))}")
    if unexpected:
        raise PromptError(f"prompt {role!r} takes no {', '.join(sorted(unexpected))}")
    return template(role).format(**{k: str(v) for k, v in values.items()})
