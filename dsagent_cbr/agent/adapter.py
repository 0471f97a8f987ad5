"""The structural adapter: transplant a past solution's modelling code into a new task's starter,
by AST, with no LLM. What differs between the two tasks is handled by rules (estimator swaps between
regression and classification, label and feature encoding, one model per target column, the output
form the new task is graded on) and, where no rule applies, it says so plainly."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from importlib import resources

from dsagent_cbr.tasks.model import Task

CASE_FUNCTIONS = {"train_model": "_case_train_model", "predict": "_case_predict"}

# Regression estimator -> its classification counterpart (and back, by inverting the table).
_TO_CLASSIFIER = {
    "LGBMRegressor": "LGBMClassifier", "XGBRegressor": "XGBClassifier", "CatBoostRegressor": "CatBoostClassifier",
    "HistGradientBoostingRegressor": "HistGradientBoostingClassifier",
    "GradientBoostingRegressor": "GradientBoostingClassifier", "RandomForestRegressor": "RandomForestClassifier",
    "ExtraTreesRegressor": "ExtraTreesClassifier", "DecisionTreeRegressor": "DecisionTreeClassifier",
    "KNeighborsRegressor": "KNeighborsClassifier", "MLPRegressor": "MLPClassifier", "SVR": "SVC",
    "LinearSVR": "LinearSVC", "Ridge": "LogisticRegression", "RidgeCV": "LogisticRegressionCV",
    "LinearRegression": "LogisticRegression", "Lasso": "LogisticRegression", "ElasticNet": "LogisticRegression",
    "SGDRegressor": "SGDClassifier", "AdaBoostRegressor": "AdaBoostClassifier",
    "BaggingRegressor": "BaggingClassifier",
}
_TO_REGRESSOR = {v: k for k, v in reversed(list(_TO_CLASSIFIER.items()))}
_TO_REGRESSOR.update({"RidgeClassifier": "Ridge", "RidgeClassifierCV": "RidgeCV", "LogisticRegression": "Ridge"})
# Arguments that name a task-specific loss; a swapped estimator must not inherit them.
_TASK_SPECIFIC_KWARGS = {"objective", "loss", "criterion", "eval_metric", "metric", "num_class", "class_weight",
                         "multi_class", "probability", "solver"}
_MODULES = ("sklearn.linear_model", "sklearn.ensemble", "sklearn.tree", "sklearn.neighbors", "sklearn.svm",
            "sklearn.neural_network", "lightgbm", "xgboost")


class AdapterError(Exception):
    """The adapter cannot apply to this pair of tasks; the message says why."""


@dataclass
class CaseSolution:
    script: str
    modality: str
    task_type: str
    metric: str
    name: str = ""


@dataclass
class Adaptation:
    code: str
    notes: list[str] = field(default_factory=list)


def output_kind(task: Task) -> str:
    if task.task_type in ("regression", "forecasting"):
        return "value"
    if task.metric_name == "accuracy":
        return "label"
    if task.metric_name == "logloss":
        return "proba-classes"
    if task.metric_name == "auroc":
        return "proba-labels" if is_multi_output(task.task_type, task.metric_name, len(task.target)) else "proba-positive"
    raise AdapterError(f"no output rule for a {task.task_type} task graded by {task.metric_name}")


def is_multi_output(task_type: str, metric: str, n_targets: int = 1) -> bool:
    return task_type == "multilabel-classification" or metric == "mcrmse" or n_targets > 1


def _is_classification(task_type: str) -> bool:
    return task_type.endswith("classification")


def _top_level_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def _loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _closure(tree: ast.Module) -> list[ast.stmt]:
    """train_model, predict and every top-level definition they reach, in source order."""
    defs = {name: stmt for stmt in tree.body for name in _top_level_names(stmt)}
    wanted, frontier = set(), ["train_model", "predict"]
    while frontier:
        name = frontier.pop()
        if name in wanted or name not in defs:
            continue
        wanted.add(name)
        frontier.extend(_loaded_names(defs[name]) - wanted)
    return [stmt for stmt in tree.body if _top_level_names(stmt) & wanted]


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str], calls_to_check: dict[str, str]) -> None:
        self.names, self.estimators, self.swapped = names, calls_to_check, []

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
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name in self.estimators:
            new = self.estimators[name]
            allowed = _accepted_kwargs(new)
            node.keywords = [k for k in node.keywords if k.arg is None or (
                k.arg not in _TASK_SPECIFIC_KWARGS and (allowed is None or k.arg in allowed))]
            self.swapped.append(f"{name} -> {new}")
        self.generic_visit(node)
        return node


def _accepted_kwargs(class_name: str) -> set[str] | None:
    """The constructor's named parameters, or None when it takes **kwargs (or cannot be found)."""
    import importlib

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


def _rename_imports(stmt: ast.stmt, estimators: dict[str, str]) -> ast.stmt:
    if isinstance(stmt, ast.ImportFrom):
        for alias in stmt.names:
            alias.name = estimators.get(alias.name, alias.name)
            if alias.asname:
                alias.asname = estimators.get(alias.asname, alias.asname)
        stmt.module = _module_for(stmt)
    return stmt


def _module_for(stmt: ast.ImportFrom) -> str | None:
    """A swapped name may live in another sklearn module (Ridge is linear_model, SVC is svm)."""
    import importlib

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
            if candidate.startswith("sklearn") and hasattr(importlib.import_module(candidate), alias.name):
                return candidate
    return module


def _shim(target: Task, per_column: bool) -> str:
    text = resources.files("dsagent_cbr.agent").joinpath("adapter_shim.py").read_text(encoding="utf-8")
    text = text[: text.index("def _case_train_model")].rstrip() + "\n"
    config = {"modality": target.modality, "output": output_kind(target),
              "classes": list(target.classes) or None, "per_column": per_column}
    start = text.index("_CBR_TASK = ")
    end = text.index("\n", start)
    return text[:start] + f"_CBR_TASK = {config!r}" + text[end:]


def adapt_solution(case: CaseSolution, target: Task) -> Adaptation:
    if case.modality != target.modality:
        raise AdapterError(f"cannot apply: the case is {case.modality} and the task is {target.modality}; "
                           "no rule carries a model across modalities")
    try:
        source = ast.parse(case.script)
        starter_text = target.starter.read_text(encoding="utf-8")
        starter = ast.parse(starter_text)
    except SyntaxError as exc:
        raise AdapterError(f"cannot apply: a script does not parse ({exc})") from exc
    source_defs = {s.name for s in source.body if isinstance(s, ast.FunctionDef)}
    missing = {"train_model", "predict"} - source_defs
    if missing:
        raise AdapterError(f"cannot apply: the case has no {', '.join(sorted(missing))}() to transplant")
    starter_funcs = [s for s in starter.body if isinstance(s, ast.FunctionDef) and s.name in CASE_FUNCTIONS]
    if len(starter_funcs) != 2:
        raise AdapterError("cannot apply: the task's starter lacks the train_model/predict skeleton")

    notes: list[str] = []
    estimators: dict[str, str] = {}
    source_cls, target_cls = _is_classification(case.task_type), _is_classification(target.task_type)
    if source_cls != target_cls:
        estimators = _TO_CLASSIFIER if target_cls else _TO_REGRESSOR
        notes.append(f"{'regression' if not source_cls else 'classification'} case on a "
                     f"{'classification' if target_cls else 'regression'} task: estimators swapped")
    per_column = is_multi_output(target.task_type, target.metric_name, len(target.target)) and not is_multi_output(
        case.task_type, case.metric)
    if per_column:
        notes.append("single-output case on a multi-output task: one model per target column")

    starter_names = {n for s in starter.body for n in _top_level_names(s)} - set(CASE_FUNCTIONS)
    renamer = _Rename(CASE_FUNCTIONS, estimators)
    body = []
    for stmt in _closure(source):
        # The task's own constants (target and id columns, class lists) describe its data: they win.
        if _top_level_names(stmt) & starter_names and not isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            continue
        body.append(renamer.visit(stmt))
    if estimators and not renamer.swapped:
        if target_cls and target.task_type != "binary-classification" and target.modality == "tabular":
            raise AdapterError("cannot apply: the regression case uses no estimator with a known classifier "
                               "counterpart, and a multi-class task needs one")
        notes.append("no known estimator to swap; the case's outputs are mapped to this task's")
    notes += [f"swapped {s}" for s in dict.fromkeys(renamer.swapped)]
    imports = [ast.unparse(_rename_imports(s, estimators)) for s in source.body if isinstance(s, ast.Import | ast.ImportFrom)]
    starter_imports = {ast.unparse(s) for s in starter.body if isinstance(s, ast.Import | ast.ImportFrom)}
    new_imports = [i for i in dict.fromkeys(imports) if i not in starter_imports]

    block = [f"# --- transplanted from case {case.name or 'solution'} by the cbr structural adapter ---",
             *new_imports, "", _shim(target, per_column), ""]
    block += [ast.unparse(stmt) + "\n" for stmt in body]
    block.append("# --- end of transplanted code ---")

    lines = starter_text.splitlines()
    spans = sorted((min([f.lineno, *[d.lineno for d in f.decorator_list]]), f.end_lineno or f.lineno)
                   for f in starter_funcs)
    out = lines[: spans[0][0] - 1] + ["\n".join(block)]
    out += lines[spans[0][1]: spans[1][0] - 1] + lines[spans[1][1]:]
    code = "\n".join(out) + "\n"
    ast.parse(code)
    return Adaptation(code=code, notes=notes)
