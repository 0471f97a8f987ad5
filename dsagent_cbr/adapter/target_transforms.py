"""A regression case's transform of its target (log1p and its expm1, Box-Cox and its inverse, a
TransformedTargetRegressor), found and stripped by AST so that it never reaches class labels; both sides
or neither, never half."""

from __future__ import annotations

import ast

from dsagent_cbr.adapter.syntax import AdapterError, call_name

# Transforms of a regression target and their inverses, by function or method name.
_TRANSFORMS = {
    "log",
    "log1p",
    "log2",
    "log10",
    "sqrt",
    "cbrt",
    "arcsinh",
    "boxcox",
    "boxcox1p",
    "yeojohnson",
    "fit_transform",
    "transform",
}
_INVERSES = {
    "exp",
    "expm1",
    "exp2",
    "square",
    "sinh",
    "inv_boxcox",
    "inv_boxcox1p",
    "inverse_transform",
}
_PAIRED = {"boxcox", "yeojohnson"}  # return (values, lambda)
_FITS = {"fit", "partial_fit", "train"}
_PREDICTS = {"predict", "predict_proba", "decision_function"}


def strip_target_transforms(train: ast.FunctionDef, predict: ast.FunctionDef) -> list[str]:
    """Remove the case's transform of its regression target (in what train_model fits on) and its
    inverse (on what predict returns), in place; returns the names removed. Refuses, rather than half
    strip, when only one side is found."""
    y_names = _derived({a.arg for a in [*train.args.args][1::2][:2]}, train)
    fitted = _fit_inputs(train)
    forward = _Strip(lambda call: _mentions(call, y_names) and id(call) in fitted, _TRANSFORMS)
    forward.visit(train)
    predicted = _derived(
        set(), predict, seed=lambda value: any(call_name(n) in _PREDICTS for n in ast.walk(value))
    )
    inverse = _Strip(
        lambda call: (
            any(call_name(n) in _PREDICTS for n in ast.walk(call)) or _mentions(call, predicted)
        ),
        _INVERSES,
    )
    inverse.visit(predict)
    if bool(forward.removed) != bool(inverse.removed):
        found, missing = (forward, "undoes") if forward.removed else (inverse, "applies")
        raise AdapterError(
            f"cannot apply: the regression case transforms its target ({', '.join(found.removed)}) "
            f"and the adapter cannot find where it {missing} it, so it cannot strip it for class labels"
        )
    ast.fix_missing_locations(train)
    ast.fix_missing_locations(predict)
    return list(dict.fromkeys(forward.removed + inverse.removed))


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _derived(names: set[str], fn: ast.FunctionDef, seed=None) -> set[str]:
    """`names` and every name assigned, inside `fn`, from an expression using them (or matching `seed`)."""
    names = set(names)
    assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign)]
    changed = True
    while changed:
        changed = False
        for node in assigns:
            if node.value is None or not (
                _mentions(node.value, names) or (seed and seed(node.value))
            ):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name) and n.id not in names:
                        names.add(n.id)
                        changed = True
    return names


def _fit_inputs(fn: ast.FunctionDef) -> set[int]:
    """ids of the call nodes whose result is fitted on: inside a .fit(...) call's arguments (an eval_set
    included), or assigned to a name that such arguments use."""
    inside: set[int] = set()
    used: set[str] = set()
    for call in (n for n in ast.walk(fn) if call_name(n) in _FITS):
        assert isinstance(call, ast.Call)
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            inside |= {id(n) for n in ast.walk(arg)}
            used |= {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
    for node in (n for n in ast.walk(fn) if isinstance(n, ast.Assign)):
        if any(
            isinstance(t, ast.Name)
            and t.id in used
            or isinstance(t, ast.Tuple)
            and _mentions(t, used)
            for t in node.targets
        ):
            inside |= {id(n) for n in ast.walk(node.value)}
    return inside


class _Strip(ast.NodeTransformer):
    """Replace a transform call that `applies` by its first argument ((arg, None) for Box-Cox's pair)."""

    def __init__(self, applies, functions: set[str]) -> None:
        self.applies = applies
        self.functions = functions
        self.removed = []

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        call = node.value
        if (
            call_name(call) in _PAIRED
            and isinstance(call, ast.Call)
            and call.args
            and self.applies(call)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Tuple)
        ):
            self.removed.append(str(call_name(call)))
            node.value = ast.Tuple(
                elts=[self.visit(call.args[0]), ast.Constant(None)], ctx=ast.Load()
            )
            return node
        self.generic_visit(node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = call_name(node)
        if name in self.functions and node.args and self.applies(node):
            self.removed.append(str(name))
            return node.args[0]
        return node


def strip_transformed_target_regressor(tree: ast.AST) -> bool:
    """TransformedTargetRegressor(regressor=R, func=..., ...) -> R; True when one was found."""

    class _Unwrap(ast.NodeTransformer):
        found = False

        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if call_name(node) != "TransformedTargetRegressor":
                return node
            inner = next(
                (k.value for k in node.keywords if k.arg == "regressor"),
                node.args[0] if node.args else None,
            )
            if inner is None:
                raise AdapterError(
                    "cannot apply: the case's TransformedTargetRegressor names no regressor to keep"
                )
            self.found = True
            return inner

    unwrap = _Unwrap()
    unwrap.visit(tree)
    return unwrap.found
