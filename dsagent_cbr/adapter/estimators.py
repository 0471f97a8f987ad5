"""What a case's estimators become for a new task, by AST: regression estimators swapped for their
classification counterparts (the arguments that name a regression loss dropped, the imports following),
a pinned multi-class loss unpinned, and a predict that returns probabilities where the metric needs
them."""

from __future__ import annotations

import ast
import copy
import importlib
import inspect

from dsagent_cbr.adapter.syntax import call_name

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


# --- a pinned multi-class loss -------------------------------------------------------------------------

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


# --- probabilities -------------------------------------------------------------------------------------


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
