"""What the structural adapter reads from, and rewrites in, a case's code (by AST, never by running it):
the form of the inputs the case's script built for train_model, estimator swaps from regression to
classification, the target transforms that must not reach class labels, and a predict that returns
probabilities."""

from __future__ import annotations

import ast
import copy
import importlib
import inspect

# Regression estimator -> its classification counterpart.
TO_CLASSIFIER = {
    "LGBMRegressor": "LGBMClassifier",
    "XGBRegressor": "XGBClassifier",
    "CatBoostRegressor": "CatBoostClassifier",
    "HistGradientBoostingRegressor": "HistGradientBoostingClassifier",
    "GradientBoostingRegressor": "GradientBoostingClassifier",
    "RandomForestRegressor": "RandomForestClassifier",
    "ExtraTreesRegressor": "ExtraTreesClassifier",
    "DecisionTreeRegressor": "DecisionTreeClassifier",
    "KNeighborsRegressor": "KNeighborsClassifier",
    "MLPRegressor": "MLPClassifier",
    "SVR": "SVC",
    "LinearSVR": "LinearSVC",
    "Ridge": "LogisticRegression",
    "RidgeCV": "LogisticRegressionCV",
    "LinearRegression": "LogisticRegression",
    "Lasso": "LogisticRegression",
    "ElasticNet": "LogisticRegression",
    "SGDRegressor": "SGDClassifier",
    "AdaBoostRegressor": "AdaBoostClassifier",
    "BaggingRegressor": "BaggingClassifier",
}
# Arguments that name a task-specific loss; a swapped estimator must not inherit them.
_TASK_SPECIFIC_KWARGS = {
    "objective",
    "loss",
    "criterion",
    "eval_metric",
    "metric",
    "num_class",
    "class_weight",
    "multi_class",
    "probability",
    "solver",
}
_MODULES = (
    "sklearn.linear_model",
    "sklearn.ensemble",
    "sklearn.tree",
    "sklearn.neighbors",
    "sklearn.svm",
    "sklearn.neural_network",
    "lightgbm",
    "xgboost",
)
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


# --- the form of the case's inputs -------------------------------------------------------------------


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


# --- regression estimators to classifiers ------------------------------------------------------------


class EstimatorSwap(ast.NodeTransformer):
    """Rename functions (the case's train_model/predict) and swap estimator classes, dropping the
    arguments that name a regression loss."""

    def __init__(self, names: dict[str, str], estimators: dict[str, str]) -> None:
        self.names = names
        self.estimators = estimators
        self.swapped = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self.names.get(node.name, node.name)
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.names.get(node.id, self.estimators.get(node.id, node.id))
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        node.attr = self.estimators.get(node.attr, node.attr)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        name = call_name(node)
        if name in self.estimators:
            new = self.estimators[name]
            allowed = _accepted_kwargs(new)
            node.keywords = [
                k
                for k in node.keywords
                if k.arg is None
                or (k.arg not in _TASK_SPECIFIC_KWARGS and (allowed is None or k.arg in allowed))
            ]
            self.swapped.append(f"{name} -> {new}")
        self.generic_visit(node)
        return node


def _accepted_kwargs(class_name: str) -> set[str] | None:
    """The constructor's named parameters, or None when it takes **kwargs (or cannot be found)."""
    for module in _MODULES:
        try:
            cls = getattr(importlib.import_module(module), class_name, None)
        except ImportError:
            continue
        if cls is None:
            continue
        params = inspect.signature(cls.__init__).parameters.values()
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return None
        return {p.name for p in params}
    return None


def rename_imports(stmt: ast.stmt, estimators: dict[str, str]) -> ast.stmt:
    if isinstance(stmt, ast.ImportFrom):
        for alias in stmt.names:
            alias.name = estimators.get(alias.name, alias.name)
            if alias.asname:
                alias.asname = estimators.get(alias.asname, alias.asname)
        stmt.module = _module_for(stmt)
    return stmt


def _module_for(stmt: ast.ImportFrom) -> str | None:
    """A swapped name may live in another sklearn module (Ridge is linear_model, SVC is svm)."""
    module = stmt.module
    if not module or not module.startswith("sklearn"):
        return module
    for alias in stmt.names:
        try:
            if hasattr(importlib.import_module(module), alias.name):
                continue
        except ImportError:
            return module
        for candidate in _MODULES:
            if candidate.startswith("sklearn") and hasattr(
                importlib.import_module(candidate), alias.name
            ):
                return candidate
    return module


# --- target transforms -------------------------------------------------------------------------------


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


# --- multi-class losses ---------------------------------------------------------------------------

_PINNED = {"objective", "eval_metric", "metric", "loss"}
_MULTICLASS_VALUES = {
    "multiclass",
    "multiclassova",
    "multi_logloss",
    "multi_error",
    "softmax",
    "multi:softmax",
    "multi:softprob",
    "mlogloss",
    "merror",
    "multiclass_ova",
    "ova",
}


def unpin_multiclass_loss(tree: ast.AST) -> bool:
    """Remove the keyword arguments and dict entries that pin a multi-class loss or metric (objective=
    "multiclass", eval_metric="multi_logloss", num_class=...), in any call or dict literal, so the library
    picks the loss from the labels it is given: binary on two classes, multi-class on more. True when
    one was removed."""

    def pinned(key: str | None, value: ast.expr) -> bool:
        return (
            key == "num_class"
            or key in _PINNED
            and isinstance(value, ast.Constant)
            and str(value.value).lower() in _MULTICLASS_VALUES
        )

    removed = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            kept = [k for k in node.keywords if not pinned(k.arg, k.value)]
            removed |= len(kept) < len(node.keywords)
            node.keywords = kept
        elif isinstance(node, ast.Dict):
            pairs = [
                (k, v)
                for k, v in zip(node.keys, node.values, strict=True)
                if not (isinstance(k, ast.Constant) and pinned(str(k.value), v))
            ]
            removed |= len(pairs) < len(node.keys)
            node.keys, node.values = [k for k, _ in pairs], [v for _, v in pairs]
    return removed


# --- probabilities -----------------------------------------------------------------------------------


def proba_variant(predict: ast.FunctionDef, name: str) -> ast.FunctionDef:
    """A copy of the case's predict, named `name`, whose model.predict(...) calls are predict_proba(...)."""
    variant = copy.deepcopy(predict)
    variant.name = name
    for node in ast.walk(variant):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "predict"
        ):
            node.func.attr = "predict_proba"
    return variant
