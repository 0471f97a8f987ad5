"""What the adapter's readings and rewrites of a case's code share: the name a call is made by, and
AdapterError, the one way any of them says that a rule cannot apply."""

from __future__ import annotations

import ast


class AdapterError(Exception):
    """The adapter cannot apply to this pair of tasks; the message says why."""


def call_name(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else None
    )
