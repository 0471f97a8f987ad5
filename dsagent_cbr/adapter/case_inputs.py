"""The form of the inputs a case's script built for train_model (a series, a frame, a list, an array),
read from its code by AST, never by running it: the adapter hands the case's code its inputs in that
form, whichever layout's starter passes them."""

from __future__ import annotations

import ast

from dsagent_cbr.adapter.syntax import call_name

_ARRAY_CALLS = {
    "array",
    "asarray",
    "load",
    "stack",
    "vstack",
    "hstack",
    "concatenate",
    "column_stack",
    "to_numpy",
}
_PASS_THROUGH = {
    "copy",
    "fillna",
    "astype",
    "reset_index",
    "dropna",
    "replace",
    "rename",
    "sort_index",
    "apply",
}


def input_kinds(tree: ast.Module) -> tuple[str | None, str | None]:
    """How the case's script built the X and y it passes to train_model: 'series', 'frame', 'list',
    'array', or None when it cannot be told (the caller then assumes our layout's forms)."""
    call = next(
        (
            n
            for n in ast.walk(tree)
            if call_name(n) == "train_model"
            and isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and len(n.args) >= 2
        ),
        None,
    )
    if call is None:
        return None, None
    values = _assignments(tree)
    return _kind_of(call.args[0], values, 0), _kind_of(call.args[1], values, 0)


def _assignments(tree: ast.Module) -> dict[str, ast.expr]:
    """Each name's last assigned value, with tuple unpacking (also of train_test_split) followed through."""
    values: dict[str, ast.expr] = {}
    for node in sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Assign)), key=lambda n: n.lineno
    ):
        for target in node.targets:
            if isinstance(target, ast.Name):
                values[target.id] = node.value
            elif isinstance(target, ast.Tuple):
                names = [t.id if isinstance(t, ast.Name) else None for t in target.elts]
                if isinstance(node.value, ast.Tuple) and len(node.value.elts) == len(names):
                    sources = list(node.value.elts)
                elif (call_name(node.value) or "").endswith("train_test_split"):
                    args = node.value.args  # type: ignore[attr-defined]
                    sources = [
                        args[i // 2] if i // 2 < len(args) else None for i in range(len(names))
                    ]
                else:
                    continue
                values.update(
                    {n: s for n, s in zip(names, sources, strict=True) if n and s is not None}
                )
    return values


def _kind_of(node: ast.expr, values: dict[str, ast.expr], depth: int) -> str | None:
    if depth > 12:
        return None
    again = lambda n: _kind_of(n, values, depth + 1)  # noqa: E731
    if isinstance(node, ast.Name):
        return again(values[node.id]) if node.id in values else None
    if isinstance(node, ast.List | ast.ListComp):
        return "list"
    if isinstance(node, ast.Attribute):
        return "array" if node.attr == "values" else None
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Name):
            key = values.get(key.id, key)
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return "series"
        if isinstance(key, ast.List | ast.ListComp):
            return "frame"
        return again(node.value) if isinstance(key, ast.Compare | ast.Slice) else None
    name = call_name(node)
    if name is None:
        return None
    assert isinstance(node, ast.Call)
    if name in ("list", "tolist", "to_list"):
        return "list"
    if name in _ARRAY_CALLS:
        return "array"
    if name in ("read_csv", "DataFrame", "drop", "select_dtypes", "assign"):
        return "frame"
    if name == "Series":
        return "series"
    if name in _PASS_THROUGH and isinstance(node.func, ast.Attribute):
        return again(node.func.value)
    return None
