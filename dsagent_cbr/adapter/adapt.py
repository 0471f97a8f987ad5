"""The structural adapter: transplant a past solution's modelling code into a new task's starter,
by AST, with no LLM. What differs between the two tasks is handled by rules, here (by rewriting the
case's code) and in untrusted/adapter_shim.py (by wrapping it at run time): the inputs in the form the case's code
was written for, whichever layout's starter passes them; a regression case on a classification task
gets classifiers and loses its target transform (log1p/expm1 and the like); a classification case on a
regression task learns quantile bins; probabilities where the metric needs them; one model per target
column, indicator columns or one-vs-rest where the target has more outputs than the case. Where no rule
applies, it says so plainly."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from importlib import resources

from dsagent_cbr.adapter.case_inputs import input_kinds
from dsagent_cbr.adapter.estimators import (
    TO_CLASSIFIER,
    EstimatorSwap,
    proba_variant,
    rename_imports,
    unpin_multiclass_loss,
)
from dsagent_cbr.adapter.syntax import AdapterError
from dsagent_cbr.adapter.target_transforms import (
    strip_target_transforms,
    strip_transformed_target_regressor,
)
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.python_syntax import parse as parse_python
from dsagent_cbr.tasks.model import Task

__all__ = ["AdapterError", "Adaptation", "CaseSolution", "adapt_solution", "unwrap_adapted"]

CASE_FUNCTIONS = {"train_model": "_case_train_model", "predict": "_case_predict"}
PROBA_FUNCTION = "_case_predict_proba"
# A case that sets this top-level name encodes every column itself (dates, categories, free text): the
# shim hands it the columns as the task has them, instead of text columns as integer codes.
RAW_COLUMNS = "CBR_RAW_COLUMNS"


@dataclass
class CaseSolution:
    script: str
    modality: str
    task_type: str
    metric: str
    name: str = ""

    @classmethod
    def from_case(cls, case: Case) -> CaseSolution:
        return cls(
            case.script, case.modality, case.task_type, case.metric, case.task_name or case.id
        )


@dataclass
class Adaptation:
    code: str
    notes: list[str] = field(default_factory=list)


# metrics of the target's logarithm: a case learns log1p of the target for them
LOG_METRICS = ("rmsle",)


def output_kind(task: Task) -> str:
    """What the task grades: values, labels, a probability per row (or per label), or per class."""
    if task.task_type in ("regression", "forecasting"):
        return "value"
    if task.metric_name == "accuracy":
        return "label"
    if task.metric_name == "logloss":
        return "proba-classes"
    if task.metric_name == "auroc":
        return "proba"
    raise AdapterError(f"no output rule for a {task.task_type} task graded by {task.metric_name}")


def case_kind(task_type: str) -> str:
    return {
        "binary-classification": "binary",
        "multiclass-classification": "multiclass",
        "multilabel-classification": "multilabel",
    }.get(task_type, task_type)


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


def _silences_warnings(stmt: ast.stmt) -> bool:
    """A top-level warnings.filterwarnings(...) or simplefilter(...): the case's own quiet, kept with it."""
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and _name(stmt.value.func) in ("filterwarnings", "simplefilter")
    )


def _name(func: ast.expr) -> str:
    return (
        func.attr
        if isinstance(func, ast.Attribute)
        else func.id
        if isinstance(func, ast.Name)
        else ""
    )


def _closure(tree: ast.Module) -> list[ast.stmt]:
    """train_model, predict, every top-level definition they reach and the case's warning filters (so
    its known noise, such as LightGBM's eval_set deprecation, does not bury a real error), in order."""
    defs = {name: stmt for stmt in tree.body for name in _top_level_names(stmt)}
    wanted, frontier = set(), ["train_model", "predict"]
    while frontier:
        name = frontier.pop()
        if name in wanted or name not in defs:
            continue
        wanted.add(name)
        frontier.extend(_loaded_names(defs[name]) - wanted)
    return [
        stmt for stmt in tree.body if _top_level_names(stmt) & wanted or _silences_warnings(stmt)
    ]


def _used_imports(
    tree: ast.Module, body: list[ast.stmt], estimators: dict[str, str]
) -> list[ast.stmt]:
    """The case's imports that the transplanted code uses (never, say, its own `from submission import`)."""
    used = set().union(*(_loaded_names(s) for s in body)) if body else set()
    kept = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Import | ast.ImportFrom):
            continue
        stmt = rename_imports(stmt, estimators)
        aliases = [
            a for a in stmt.names if a.name == "*" or (a.asname or a.name.split(".")[0]) in used
        ]
        if aliases:
            stmt.names = aliases
            kept.append(stmt)
    return kept


def _case_functions(body: list[ast.stmt]) -> tuple[ast.FunctionDef, ast.FunctionDef]:
    found = {s.name: s for s in body if isinstance(s, ast.FunctionDef) and s.name in CASE_FUNCTIONS}
    return found["train_model"], found["predict"]


def _starter_classes(starter: ast.Module) -> list[str]:
    """A CLASSES = [...] list of strings in the starter (the probability columns of a log-loss task)."""
    for stmt in starter.body:
        if isinstance(stmt, ast.Assign) and "CLASSES" in _top_level_names(stmt):
            try:
                value = ast.literal_eval(stmt.value)
            except ValueError:
                return []
            if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
                return list(value)
    return []


def _shim(config: dict) -> str:
    text = (
        resources.files("dsagent_cbr.untrusted")
        .joinpath("adapter_shim.py")
        .read_text(encoding="utf-8")
    )
    text = text[: text.index("def _case_train_model")].rstrip() + "\n"
    start = text.index("_CBR_TASK = ")
    end = text.index("\n", text.index("}", start))
    return text[:start] + f"_CBR_TASK = {config!r}" + text[end:]


def _encodes_its_columns(tree: ast.Module) -> bool:
    """The case sets CBR_RAW_COLUMNS = True at the top level."""
    return any(
        isinstance(s, ast.Assign)
        and RAW_COLUMNS in _top_level_names(s)
        and isinstance(s.value, ast.Constant)
        and s.value.value is True
        for s in tree.body
    )


def _named_strings(body: list[ast.stmt]) -> list[str]:
    """The short strings the case's code names: a text column among them is one the case was written
    for, so the shim hands it over as it is, not as integer codes."""
    return sorted(
        {
            node.value
            for stmt in body
            for node in ast.walk(stmt)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and 0 < len(node.value) <= 100
        }
    )


def _input_forms(tree: ast.Module, modality: str) -> tuple[str, str]:
    """The forms the case's code takes X and y in: as its own script built them, else our layout's."""
    x_kind, y_kind = input_kinds(tree)
    csv = modality in ("tabular", "text")
    default_x = {"tabular": "frame", "text": "series"}.get(modality, "array")
    return x_kind or default_x, y_kind or ("series" if csv else "array")


def _target_notes(case_kind_: str, case_multi: bool, target: Task, target_cls: bool) -> list[str]:
    """The run-time rules of untrusted/adapter_shim.py that this pair will meet, in words."""
    multi_target = target.task_type == "multilabel-classification" or len(target.target) > 1
    notes = []
    if multi_target and not case_multi:
        notes.append("single-output case on a multi-output task: one model per target column")
    if not target_cls and case_kind_ in ("binary", "multiclass", "multilabel"):
        bins = "2 (above or below the median)" if case_kind_ == "binary" else "10"
        notes.append(
            f"classification case on a regression task: the target is learnt as {bins} quantile bins "
            "and predicted as the probability-weighted mean of the bins"
        )
    if target_cls and case_kind_ == "multilabel" and not multi_target:
        notes.append("multi-label case on a single-label task: one indicator column per class")
    if target_cls and case_kind_ == "binary" and target.task_type == "multiclass-classification":
        notes.append(
            "binary case on a multi-class task: one-vs-rest if the case gives one probability"
        )
    return notes


def adapt_solution(case: CaseSolution, target: Task, account: dict | None = None) -> Adaptation:
    """The case's train_model/predict, rewritten for the target, wrapped by the shim, in the target's starter.
    `account`: the shim's account of the case (its kind, the forms of its inputs), when the case is an
    edit of an adapted script's inner code (adapter/edit.py): that code was rewritten for this target when it
    was first adapted, so it is only renamed and wrapped. An adapted script carries its own account."""
    if case.modality != target.modality:
        raise AdapterError(
            f"cannot apply: the case is {case.modality} and the task is {target.modality}; "
            "no rule carries a model across modalities"
        )
    edited = account is not None
    inner, carried = unwrap_adapted(case.script)
    if carried is not None:  # adapted before: the case inside, as the shim described it then
        case, account = replace(case, script=inner), carried
    source, starter, starter_text = _parse_pair(case, target)
    account = account or _case_account(case, source)
    kind, target_cls = str(account["case"]), _is_classification(target.task_type)
    body, names = _case_body(source, starter)
    if edited:
        body, notes = [EstimatorSwap(names, {}).visit(stmt) for stmt in body], []
    else:
        body, notes = _rewrite_for_target(body, names, kind, target)
    notes += _target_notes(kind, bool(account["case_multi"]), target, target_cls)
    config = {
        "modality": target.modality,
        "output": output_kind(target),
        "classes": list(target.classes) or _starter_classes(starter) or None,
        **{key: account[key] for key in ("case", "case_multi", "x_kind", "y_kind")},
        "target": list(target.target) or None,
        "named": _named_strings(body),
        "raw": bool(account.get("raw")),
        "log_target": target.metric_name in LOG_METRICS,
    }
    to_classes = target_cls and kind in ("regression", "forecasting") and not edited
    block = _transplant(case, source, starter, body, config, TO_CLASSIFIER if to_classes else {})
    code = splice(starter_text, starter, block)
    parse_python(code)
    return Adaptation(code=code, notes=notes)


def _case_account(case: CaseSolution, source: ast.Module) -> dict:
    """The shim's account of a case adapted for the first time: its kind and its inputs' forms, from its code."""
    kind = case_kind(case.task_type)
    x_kind, y_kind = _input_forms(source, case.modality)
    return {
        "case": kind,
        "case_multi": kind in ("multilabel", "forecasting") or case.metric == "mcrmse",
        "x_kind": x_kind,
        "y_kind": y_kind,
        "raw": _encodes_its_columns(source),
    }


def _transplant(
    case: CaseSolution,
    source: ast.Module,
    starter: ast.Module,
    body: list[ast.stmt],
    config: dict,
    estimators: dict[str, str],
) -> str:
    """The block that takes the starter's train_model/predict's place: the case's imports, the shim, its code."""
    imports = [ast.unparse(s) for s in _used_imports(source, body, estimators)]
    starter_imports = {
        ast.unparse(s) for s in starter.body if isinstance(s, ast.Import | ast.ImportFrom)
    }
    block = [
        f"# --- transplanted from case {case.name or 'solution'} by the cbr structural adapter ---",
        *[i for i in dict.fromkeys(imports) if i not in starter_imports],
        "",
        _shim(config),
        "",
        *[ast.unparse(stmt) + "\n" for stmt in body],
        _proba_code(body, config["output"], config["case"]) + "\n",
        "# --- end of transplanted code ---",
    ]
    return "\n".join(block)


_SHIM_PREFIXES = ("_cbr", "_CBR", "_Cbr")


class _CaseNames(ast.NodeTransformer):
    """_case_x back to x: the names the adapter gave the case's own functions."""

    def _back(self, name: str) -> str:
        return name.removeprefix("_case_") if name.startswith("_case_") else name

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self._back(node.id)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self._back(node.name)
        self.generic_visit(node)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        node.name = self._back(node.name)
        self.generic_visit(node)
        return node


def unwrap_adapted(script: str) -> tuple[str, dict | None]:
    """A script the adapter made (a solution retained from an adapted run) holds the case's code under
    _case_ names beside the shim's train_model/predict: this gives the case's code back as it was, with
    the shim's account of it (its kind, the forms of its inputs), so that adapting it again transplants
    one copy, not the old wrapper inside a new one. Any other script comes back unchanged, with None."""
    try:
        tree = parse_python(script)
    except SyntaxError:
        return script, None
    config = next((s.value for s in tree.body if "_CBR_TASK" in _top_level_names(s)), None)
    if config is None or CASE_FUNCTIONS["train_model"] not in {
        n for s in tree.body for n in _top_level_names(s)
    }:
        return script, None
    kept = [_CaseNames().visit(stmt) for stmt in tree.body if _of_the_case(stmt)]
    try:
        account = ast.literal_eval(config)
    except ValueError:
        account = None
    return ast.unparse(ast.Module(body=kept, type_ignores=[])) + "\n", account if isinstance(
        account, dict
    ) else None


def _of_the_case(stmt: ast.stmt) -> bool:
    """A statement of an adapted script the case brought: its imports, definitions and warning filters, not
    the shim's (its wrappers, its `_np`/`_pd` imports, its _cbr names and the file its scores go to)."""
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return not all((a.asname or a.name).startswith("_") for a in stmt.names)
    own = _top_level_names(stmt)
    shim = own & {"train_model", "predict", PROBA_FUNCTION, "CBR_CLASS_SCORES"} or any(
        n.startswith(_SHIM_PREFIXES) for n in own
    )
    return bool(own and not shim) or _silences_warnings(stmt)


def _parse_pair(case: CaseSolution, target: Task) -> tuple[ast.Module, ast.Module, str]:
    try:
        source = parse_python(case.script)
        starter_text = target.starter.read_text(encoding="utf-8")
        starter = parse_python(starter_text)
    except SyntaxError as exc:
        raise AdapterError(f"cannot apply: a script does not parse ({exc})") from exc
    missing = set(CASE_FUNCTIONS) - {s.name for s in source.body if isinstance(s, ast.FunctionDef)}
    if missing:
        raise AdapterError(
            f"cannot apply: the case has no {', '.join(sorted(missing))}() to transplant"
        )
    if (
        len(
            [s for s in starter.body if isinstance(s, ast.FunctionDef) and s.name in CASE_FUNCTIONS]
        )
        != 2
    ):
        raise AdapterError(
            "cannot apply: the task's starter lacks the train_model/predict skeleton"
        )
    return source, starter, starter_text


def _case_body(source: ast.Module, starter: ast.Module) -> tuple[list[ast.stmt], dict[str, str]]:
    """The case's statements to transplant, and the names they take. The task's own constants (target
    and id columns, class lists) describe its data: they win. The case's functions and classes keep
    their code, under a new name where the starter uses theirs."""
    starter_names = {n for s in starter.body for n in _top_level_names(s)} - set(CASE_FUNCTIONS)
    body = [
        s
        for s in _closure(source)
        if isinstance(s, ast.FunctionDef | ast.ClassDef) or not _top_level_names(s) & starter_names
    ]
    defined = {
        n
        for s in body
        if isinstance(s, ast.FunctionDef | ast.ClassDef)
        for n in _top_level_names(s)
    }
    return body, {**CASE_FUNCTIONS, **{n: f"_case_{n}" for n in defined & starter_names}}


def _rewrite_for_target(
    body: list[ast.stmt], names: dict[str, str], kind: str, target: Task
) -> tuple[list[ast.stmt], list[str]]:
    """Rename the case's functions; for a regression case on a classification task strip its target
    transform and swap its estimators; free a multi-class case's loss. Returns the new body and notes."""
    notes: list[str] = []
    regression_to_classes = _is_classification(target.task_type) and kind in (
        "regression",
        "forecasting",
    )
    estimators = TO_CLASSIFIER if regression_to_classes else {}
    if regression_to_classes:
        stripped = strip_target_transforms(*_case_functions(body))
        stripped += (
            ["TransformedTargetRegressor"]
            if strip_transformed_target_regressor(ast.Module(body, []))
            else []
        )
        if stripped:
            notes.append(
                f"regression case on a classification task: its target transform ({', '.join(stripped)}) "
                "stripped, class labels are not transformed"
            )
    if kind == "multiclass" and unpin_multiclass_loss(ast.Module(body, [])):
        notes.append(
            "multi-class case: its multi-class loss setting removed, the library picks the loss from "
            "the labels (binary on two classes)"
        )
    swap = EstimatorSwap(names, estimators)
    body = [swap.visit(stmt) for stmt in body]
    if regression_to_classes:
        if swap.swapped:
            notes.append("regression case on a classification task: estimators swapped")
            notes += [f"swapped {s}" for s in dict.fromkeys(swap.swapped)]
        elif target.task_type == "multiclass-classification":
            raise AdapterError(
                "cannot apply: the regression case uses no estimator with a known classifier "
                "counterpart, and a multi-class task needs one"
            )
        else:
            notes.append("no known estimator to swap; the case's outputs are mapped to this task's")
    return body, notes


def _proba_code(body: list[ast.stmt], output: str, kind: str) -> str:
    """The case's predict returning probabilities, where the task or the shim's rules want them."""
    predict_fn = next(
        s for s in body if isinstance(s, ast.FunctionDef) and s.name == CASE_FUNCTIONS["predict"]
    )
    wanted = output != "value" or kind in ("binary", "multiclass", "multilabel")
    calls_predict = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "predict"
        for n in ast.walk(predict_fn)
    )
    if wanted and calls_predict:
        return ast.unparse(proba_variant(predict_fn, PROBA_FUNCTION))
    return f"{PROBA_FUNCTION} = None"


def splice(starter_text: str, starter: ast.Module, block: str) -> str:
    """The starter with its train_model/predict replaced by `block` (at the first one's place)."""
    funcs = [s for s in starter.body if isinstance(s, ast.FunctionDef) and s.name in CASE_FUNCTIONS]
    lines = starter_text.splitlines()
    spans = sorted(
        (min([f.lineno, *[d.lineno for d in f.decorator_list]]), f.end_lineno or f.lineno)
        for f in funcs
    )
    out = (
        lines[: spans[0][0] - 1]
        + [block]
        + lines[spans[0][1] : spans[1][0] - 1]
        + lines[spans[1][1] :]
    )
    return "\n".join(out) + "\n"
