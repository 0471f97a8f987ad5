"""The search's *tune* operator: the literals a node's model is built with (`num_leaves=31`, `C=4.0`)
are its hyper-parameters. Optuna proposes the next values (ask) from every tried value of that family
of nodes (told, as finished trials rebuilt from the run's rows, so a resumed run proposes the same),
warm-started with the values the neighbouring cases in the bank built the same model with.

The search is local: each literal moves within a band around the value the family's root was written
with (a factor of BAND either way for scales and counts, SHIFT either way for fractions), inside the
knob's sensible range. A budget of minutes gives a family a handful of tunes, all of them in Optuna's
random start; over the whole range most of them were worse than the root (and the slowest, a tiny
learning rate on deep trees, took a minute each), while a root written with sensible defaults is a good
centre to search around."""

from __future__ import annotations

import ast
import itertools
import math
from dataclasses import dataclass

from dsagent_cbr.python_syntax import parse as parse_python

# name: (kind, low, high). Only names whose meaning is known are tuned: a literal of unknown meaning may
# be a probability, a seed or a shape, and moving it could only break the script.
SPACE: dict[str, tuple[str, float, float]] = {
    "learning_rate": ("log", 0.005, 0.3),
    "eta": ("log", 0.005, 0.3),
    "num_leaves": ("int", 7, 255),
    "max_leaves": ("int", 7, 255),
    "max_depth": ("int", 2, 12),
    "depth": ("int", 3, 10),
    "min_child_samples": ("int", 2, 200),
    "min_data_in_leaf": ("int", 2, 200),
    "min_child_weight": ("log", 1e-3, 20.0),
    "min_samples_leaf": ("int", 1, 50),
    "min_samples_split": ("int", 2, 50),
    "subsample": ("float", 0.4, 1.0),
    "bagging_fraction": ("float", 0.4, 1.0),
    "colsample_bytree": ("float", 0.3, 1.0),
    "feature_fraction": ("float", 0.3, 1.0),
    "reg_alpha": ("log", 1e-4, 30.0),
    "reg_lambda": ("log", 1e-4, 30.0),
    "lambda_l1": ("log", 1e-4, 30.0),
    "lambda_l2": ("log", 1e-4, 30.0),
    "l2_leaf_reg": ("log", 0.5, 30.0),
    "C": ("log", 1e-3, 1e3),
    "alpha": ("log", 1e-5, 1e2),
}
ROUNDS = ("n_estimators", "iterations", "num_boost_round")  # tuned only without early stopping
BAND = 4.0  # scales and counts: from the root's value / BAND to its value * BAND
SHIFT = 0.3  # fractions: the root's value +- SHIFT
STARTUP = 4  # Optuna's random proposals before its TPE model proposes (its default, 10, is past a short budget)
MAX_LISTED = 4096  # an integer space this small is listed when TPE wants values tried already
_MODEL_PREFIXES = ("LGBM", "XGB", "CatBoost")
_MODEL_SUFFIXES = ("Regressor", "Classifier", "Regression", "SVC", "SVR")
_MODELS = {
    "Ridge",
    "RidgeClassifier",
    "Lasso",
    "ElasticNet",
    "LogisticRegression",
    "SVC",
    "SVR",
    "LinearSVC",
    "LinearSVR",
    "KernelRidge",
}


@dataclass(frozen=True)
class Knob:
    """One literal keyword argument of the model's constructor, and where its text is."""

    name: str
    value: float
    integer: bool
    span: tuple[int, int, int, int]  # line, column, end line, end column of the literal


def _is_model(call: ast.Call) -> bool:
    name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
    return name.startswith(_MODEL_PREFIXES) or name.endswith(_MODEL_SUFFIXES) or name in _MODELS


def _number(node: ast.expr) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return -inner if inner is not None else None
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def knobs(script: str) -> list[Knob]:
    """The tunable literals of the first model constructor that has any; none in a script that does not
    parse (a model's broken script is a node too)."""
    try:
        tree = parse_python(script)
    except (SyntaxError, ValueError):
        return []
    stops_early = "early_stopping" in script
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_model(n)):
        found = []
        for keyword in call.keywords:
            value = _number(keyword.value)
            tunable = keyword.arg in SPACE or (keyword.arg in ROUNDS and not stops_early)
            if value is not None and tunable and math.isfinite(value):
                node = keyword.value
                found.append(
                    Knob(
                        keyword.arg,
                        value,
                        isinstance(value, int),
                        (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset),
                    )
                )
        if found:
            return found
    return []


def distributions(found: list[Knob]) -> dict[str, object]:
    """Optuna's distribution for each knob: its band around the value the script has now (search is
    local), inside the knob's range (widened to hold that value)."""
    from optuna.distributions import FloatDistribution, IntDistribution

    out: dict[str, object] = {}
    for knob in found:
        kind, low, high = SPACE.get(knob.name, ("int", max(1.0, knob.value / 2), knob.value * 3))
        value = knob.value
        low, high = min(low, value), max(high, value)
        if kind == "float":
            out[knob.name] = FloatDistribution(max(low, value - SHIFT), min(high, value + SHIFT))
        elif value > 0:
            low, high = max(low, value / BAND), min(high, value * BAND)
            if kind == "int":
                out[knob.name] = IntDistribution(
                    max(1, math.ceil(low)), max(math.floor(high), math.ceil(low)), log=True
                )
            else:
                out[knob.name] = FloatDistribution(low, high, log=True)
        # a count written as 0 or below (max_depth=0, -1) means no limit, and stays so: the author bounded
        # the trees otherwise (by leaves), and a tune would only add a limit they chose not to have
    return out


def with_values(script: str, found: list[Knob], values: dict[str, float]) -> str:
    """The script with its knobs set to `values` (text edits only: comments and layout stay)."""
    lines = script.splitlines(keepends=True)
    for knob in sorted(found, key=lambda k: k.span, reverse=True):
        if knob.name not in values:
            continue
        line, col, end_line, end_col = knob.span
        value = values[knob.name]
        text = str(int(round(value))) if knob.integer else f"{float(value):.6g}"
        if line == end_line:
            row = lines[line - 1].encode()
            lines[line - 1] = (row[:col] + text.encode() + row[end_col:]).decode()
    return "".join(lines)


def warm_values(found: list[Knob], scripts: list[str]) -> list[dict[str, float]]:
    """The values the neighbouring cases' scripts build the same knobs with, inside this node's space."""
    space, names = distributions(found), {k.name for k in found}
    out = []
    for script in scripts:
        try:
            theirs = knobs(script)
        except SyntaxError:
            continue
        values = {k.name: k.value for k in theirs if k.name in names and k.name in space}
        values = {name: v for name, v in values.items() if space[name].low <= v <= space[name].high}
        if values and values not in out:
            out.append(values)
    return out


def space_size(found: list[Knob]) -> float:
    """How many distinct values the knobs can take together: infinite when any is a float."""
    size = 1.0
    for dist in distributions(found).values():
        if getattr(dist, "step", None) is None:  # a float: no end to its values
            return math.inf
        size *= dist.high - dist.low + 1
    return size


def propose(
    found: list[Knob],
    tried: list[tuple[dict[str, float], float | None]],
    warm: list[dict[str, float]],
    direction: str,
    seed: int,
    running: list[dict[str, float]] = (),
) -> dict[str, float]:
    """Optuna's next values for the knobs: the tried ones told as finished (or failed) trials, the
    neighbours' values queued first, then TPE's proposal. Where TPE wants values tried already or
    `running` (the forest's one knob has eight values, and a one-minute run tried one twice), the nearest
    untried ones are proposed instead."""
    import optuna
    from optuna.trial import TrialState, create_trial

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = distributions(found)
    study = optuna.create_study(
        direction=direction, sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=STARTUP)
    )
    for params, score in tried:
        inside = {
            k: v for k, v in params.items() if k in space and space[k].low <= v <= space[k].high
        }
        state = (
            TrialState.COMPLETE if score is not None and math.isfinite(score) else TrialState.FAIL
        )
        study.add_trial(
            create_trial(
                params=inside,
                distributions={k: space[k] for k in inside},
                state=state,
                value=score if state == TrialState.COMPLETE else None,
            )
        )
    # the first neighbour's values not tried yet (Optuna's own skip_if_exists compares whole trials, and a
    # neighbour sets only some of the knobs: it would be queued again on every call)
    fresh = [values for values in warm if not any(_matches(params, values) for params, _ in tried)]
    if fresh:
        study.enqueue_trial(fresh[0])
    wanted = dict(study.ask(space).params)
    taken = [params for params, _ in tried] + list(running)
    if any(_matches(wanted, params) for params in taken):
        return _nearest_untried(space, taken, wanted) or wanted
    return wanted


def _nearest_untried(
    space: dict[str, object], taken: list[dict[str, float]], wanted: dict[str, float]
) -> dict[str, float] | None:
    """The values not tried yet nearest (on a log scale) to those TPE wanted again, where every knob is an
    integer of a small range: TPE's choice there is the same however often it is asked. None in a space
    too large to list, or spent."""
    ranges = {name: range(d.low, d.high + 1) for name, d in space.items() if getattr(d, "step", None)}
    if len(ranges) != len(space) or math.prod(map(len, ranges.values())) > MAX_LISTED:
        return None
    untried = [
        values
        for values in (dict(zip(ranges, point, strict=True)) for point in itertools.product(*ranges.values()))
        if not any(_matches(values, params) for params in taken)
    ]
    distance = lambda values: sum(abs(math.log(values[k] / wanted[k])) for k in values)  # noqa: E731
    return min(untried, key=distance, default=None)


def _matches(params: dict[str, float], values: dict[str, float]) -> bool:
    return all(
        name in params and math.isclose(params[name], value) for name, value in values.items()
    )
