"""One line saying what a training script does, read from its source by AST (never by running it).

The search's tree log names its nodes by how they were made ("Adapted general", "transplant diamonds-price"),
which tells a model reading the log nothing of what each node tried. `summarise_script(code)` says it: the
model family and its key parameters (from `describe_model`) and the feature steps the script takes, e.g.
`LightGBM (n_estimators=500, learning_rate=0.05); features: native categoricals, date parts`. Feature steps
are found from the constructors and functions a script calls and a few common idioms (`.dt.year`,
`np.log1p(y)`), listed in the table `_STEPS`. A step the script takes only under a condition (a general
solution builds TF-IDF only for the text columns a table has) is listed after "if present". An adapted
script is read without the adapter's shim, which every transplant holds; the search's blend is named with
its members' families and weights. Any text gives a line: a script that does not parse is said to be one."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable

from dsagent_cbr.adapter import unwrap_adapted
from dsagent_cbr.agent.model_family import UNKNOWN, describe_model
from dsagent_cbr.python_syntax import parse as parse_python

MAX_CHARS = 200
NOT_PARSED = "a script that does not parse"
TOO_DEEP = "a script nested too deeply to read"

Matcher = Callable[[ast.AST], bool]


def _name(func: ast.expr) -> str:
    return (
        func.attr
        if isinstance(func, ast.Attribute)
        else func.id
        if isinstance(func, ast.Name)
        else ""
    )


def _call(*names: str, args: str | None = None, keyword: tuple[str, str] | None = None) -> Matcher:
    """A call of one of `names` (the last part of `a.b.name(...)`); with `args`, a regular expression its
    positional arguments (unparsed, joined by ", ") must match; with `keyword`, (keyword, expression) its
    value must match."""

    def match(node: ast.AST) -> bool:
        if not isinstance(node, ast.Call) or _name(node.func) not in names:
            return False
        if args is not None and not re.search(args, ", ".join(ast.unparse(a) for a in node.args)):
            return False
        return keyword is None or any(
            k.arg == keyword[0] and re.search(keyword[1], ast.unparse(k.value))
            for k in node.keywords
        )

    return match


def _keyword(*names: str) -> Matcher:
    """Any call given one of these keywords: the model is told which columns are categorical."""
    return lambda node: isinstance(node, ast.Call) and any(k.arg in names for k in node.keywords)


def _accessor(owner: str, *attrs: str) -> Matcher:
    """`x.owner.attr`, e.g. `when.dt.month`."""
    return lambda node: (
        isinstance(node, ast.Attribute)
        and node.attr in attrs
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == owner
    )


def _derived_column(node: ast.AST) -> bool:
    """`X["family"] = X["sibsp"] + X["parch"]`: a column computed by arithmetic or a comparison of others."""
    if not (
        isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) for t in node.targets)
    ):
        return False
    return any(
        isinstance(part, ast.BinOp | ast.Compare)
        and any(isinstance(leaf, ast.Subscript) for leaf in ast.walk(part))
        for part in ast.walk(node.value)
    )


_STATISTICS = (
    "mean",
    "std",
    "var",
    "min",
    "max",
    "median",
    "quantile",
    "percentile",
    "nanmean",
    "nanstd",
    "nanmin",
    "nanmax",
    "nanmedian",
    "nanquantile",
    "nanpercentile",
    "sum",
    "nansum",
)


def _row_statistic(node: ast.AST) -> bool:
    """A statistic along a row (axis 1 on: across a row's columns or a series' steps). Axis 0 gives a
    column's statistic, as scaling by hand does, and keepdims=True one to centre or normalise rows by."""
    if not (isinstance(node, ast.Call) and _name(node.func) in _STATISTICS):
        return False
    given = {k.arg: ast.unparse(k.value) for k in node.keywords}
    return given.get("axis", "0") not in ("0", "None") and given.get("keepdims") != "True"


# what names the target in a script: y, y_train, train_y, TARGET, labels
_TARGET = r"\b(?i:y|y_\w+|\w+_y|target\w*|labels?)\b"
_DATE_PARTS = (
    "year",
    "month",
    "day",
    "hour",
    "minute",
    "weekday",
    "dayofweek",
    "day_of_week",
    "dayofyear",
    "day_of_year",
    "quarter",
    "week",
    "weekofyear",
    "is_weekend",
    "is_month_start",
    "is_month_end",
)
# (what a step is called, how it shows in a script), in the order a summary lists them; one step may have
# several rows. Names are the last part of a call, so `pd.get_dummies` and `get_dummies` both match.
_STEPS: tuple[tuple[str, Matcher], ...] = (
    (
        "TF-IDF of text",
        _call("TfidfVectorizer", "TfidfTransformer", "CountVectorizer", "HashingVectorizer"),
    ),
    (
        "character n-grams",
        _call(
            "TfidfVectorizer", "CountVectorizer", "HashingVectorizer", keyword=("analyzer", "char")
        ),
    ),
    ("sentence embeddings", _call("SentenceTransformer")),
    ("pretrained transformer", _call("AutoTokenizer", "AutoModel")),
    ("one-hot", _call("OneHotEncoder", "get_dummies", "DictVectorizer")),
    ("native categoricals", _call("astype", args=r"^'category'|CategoricalDtype")),
    ("native categoricals", _call("Categorical", "CategoricalDtype")),
    ("native categoricals", _keyword("categorical_feature", "cat_features", "enable_categorical")),
    ("categories as codes", _call("OrdinalEncoder", "LabelEncoder", "factorize")),
    ("categories as codes", _accessor("cat", "codes")),
    (
        "target encoding",
        _call("TargetEncoder", "CatBoostEncoder", "MEstimateEncoder", "WOEEncoder"),
    ),
    ("date parts", _accessor("dt", *_DATE_PARTS)),
    ("date parts", _call("getattr", args=r"\.dt\b")),  # getattr(when.dt, part) over a list of parts
    ("lags", _call("shift")),
    ("rolling stats", _call("rolling", "ewm", "expanding")),
    ("differences", _call("diff")),
    ("spectrum", _call("fft", "rfft", "periodogram", "welch", "stft")),
    ("interval statistics", _call("array_split")),
    ("row statistics", _row_statistic),
    ("group aggregates", _call("groupby")),
    ("derived columns", _derived_column),
    (
        "imputed",
        _call(
            "SimpleImputer",
            "KNNImputer",
            "IterativeImputer",
            "nan_to_num",
            "interpolate",
            "ffill",
            "bfill",
        ),
    ),
    (
        "imputed",
        _call("fillna", args=r"^(?!'')"),
    ),  # fillna("") blanks missing text: nothing is estimated
    (
        "scaled",
        _call("StandardScaler", "MinMaxScaler", "RobustScaler", "MaxAbsScaler", "Normalizer"),
    ),
    ("power-transformed", _call("PowerTransformer", "QuantileTransformer")),
    ("binned", _call("KBinsDiscretizer", "cut", "qcut")),
    ("polynomial features", _call("PolynomialFeatures")),
    ("splines", _call("SplineTransformer")),
    ("PCA", _call("PCA")),
    ("SVD", _call("TruncatedSVD")),
    (
        "feature selection",
        _call(
            "SelectKBest",
            "SelectPercentile",
            "SelectFromModel",
            "VarianceThreshold",
            "RFE",
            "RFECV",
        ),
    ),
    ("log target", _call("log1p", "log", args=_TARGET)),
    ("log target", _call("expm1")),  # predictions brought back from the log scale
    ("log target", _call("exp", args=r"\.predict\(")),
    ("log target", _call("TransformedTargetRegressor", keyword=("func", "log"))),
    ("log features", _call("log1p", args=r"^(?!.*" + _TARGET + ")")),
)
# a function a script builds its own features in; named when no step above shows what it does
_FEATURE_FUNCTION = re.compile(r"feature|design|encode|engineer|transform|prepare", re.IGNORECASE)


def _guarded(tree: ast.Module) -> set[int]:
    """ids of the nodes run only under a condition (a script's `if __name__ == "__main__":` is none): a
    general solution one-hots the categorical columns a table has, and a table may have none."""
    guards = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.IfExp)
        or (isinstance(node, ast.If) and "__name__" not in ast.unparse(node.test))
        or (
            isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp)
            and any(g.ifs for g in node.generators)
        )
    ]
    return {id(inner) for node in guards for inner in ast.walk(node)}


def feature_steps(tree: ast.Module) -> tuple[list[str], list[str]]:
    """The feature steps a script takes, in `_STEPS` order: those it always takes, those only under a
    condition (for the columns of a kind a table has)."""
    guarded = _guarded(tree)
    seen: dict[str, bool] = {}  # step -> taken unconditionally somewhere
    # every step shows as a call, an attribute or an assignment: the rest of the tree need not be tried
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Call | ast.Attribute | ast.Assign)]
    for label, matches in _STEPS:
        for node in nodes:
            if matches(node):
                seen[label] = seen.get(label, False) or id(node) not in guarded
    if not seen:
        own = [
            n.name
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and _FEATURE_FUNCTION.search(n.name)
        ]
        return [f"hand-made in {own[0]}()"] if own else [], []
    return [s for s, always in seen.items() if always], [
        s for s, always in seen.items() if not always
    ]


def _model(code: str, tree: ast.Module) -> tuple[str, str, str]:
    """(family, key parameters, what wraps it), e.g. ("Random forest", "n_estimators=500", "grid search")."""
    info = describe_model(code)
    family, params = info.family, info.params
    if family == UNKNOWN:
        family = _imported_family(tree)
    if family == UNKNOWN:
        return "model unknown", "", ""
    # describe_model notes wrappers (the names its _WRAPPERS give) and the features a model learns on in
    # brackets after the family; the features are listed after the model here, so only the wrappers stay.
    # A note not listed here keeps its brackets, which says no less.
    wrappers = []
    if notes := re.fullmatch(
        r"(.*?) \(((?:voting|stacking|bagging|grid search|random search|one-vs-rest|"
        r"multi-output|chain|calibrated|transformed target|on )[^()]*)\)",
        family,
    ):
        family = notes.group(1)
        wrappers = [n for n in notes.group(2).split(", ") if not n.startswith("on ")]
    return family, params, ", ".join(wrappers)


def _imported_family(tree: ast.Module) -> str:
    """The family of the estimators a script imports without calling them by name, as in
    `for forest in (RandomForestClassifier, ExtraTreesClassifier): forest(...)`, which describe_model
    does not follow: its parameters are not known, its family is."""
    names = [
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name != "*"
    ]
    return describe_model("\n".join(f"{name}()" for name in names)).family


def _features(always: list[str], conditional: list[str]) -> str:
    """ "features: scaled; if present: TF-IDF of text, date parts" (steps for the columns a table has)."""
    if not conditional:
        return "features: " + (", ".join(always) or "as given")
    present = "if present: " + ", ".join(conditional)
    return f"features: {', '.join(always)}; {present}" if always else f"features {present}"


def _line(family: str, params: str, wrappers: str, features: str) -> str:
    """The line within MAX_CHARS: the model's parameters give way first, each whole, then the end."""

    def line(shown: str) -> str:
        return (
            family
            + (f" ({shown})" if shown else "")
            + (f" via {wrappers}" if wrappers else "")
            + "; "
            + features
        )

    while len(_one_line(line(params))) > MAX_CHARS and params not in ("", "…"):
        kept = params.removesuffix(", …").rsplit(", ", 1)[0] if ", " in params else ""
        params = f"{kept}, …" if kept else "…"
    return _clipped(line(params))


def _one_line(text: str) -> str:
    return " ".join(text.split())  # whatever a parameter's value holds (a newline in a string)


def _clipped(text: str) -> str:
    text = _one_line(text)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"


@functools.lru_cache(maxsize=256)  # the tree log describes every node again for each prompt
def summarise_script(code: str) -> str:
    """One line: the model, its key parameters and the feature steps, e.g.
    `Logistic regression (C=1.0); features: TF-IDF of text, one-hot`."""
    try:
        tree = parse_python(code)
    # ValueError: a NUL byte in the text
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return NOT_PARSED
    try:
        if (blend := _blend(tree)) is not None:
            return blend
        code, tree = _unwrapped(code, tree)
        return _line(*_model(code, tree), _features(*feature_steps(tree)))
    # ast.unparse recurses; a parsable but absurdly deep expression exhausts it
    except RecursionError:
        return TOO_DEEP


def _unwrapped(code: str, tree: ast.Module) -> tuple[str, ast.Module]:
    """An adapted script without the adapter's shim: the shim's label encoding and output decoding are
    in every transplant and say nothing of what the case in it does."""
    try:
        inner = unwrap_adapted(code)[0]
        return (inner, parse_python(inner)) if inner != code else (code, tree)
    # the shim's settings read as no literal, e.g. {[1]: 2}
    except (SyntaxError, TypeError, ValueError):
        return code, tree


def _blend(tree: ast.Module) -> str | None:
    """The search's ensemble script (untrusted/blend.py, its members' code in MEMBERS and their weights in
    PLAN): "Blend of 3 scripts (weighted mean): 0.25 LightGBM, 0.45 XGBoost, 0.3 LightGBM"."""
    values = {
        t.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    members = values.get("MEMBERS")
    if not (
        isinstance(members, ast.List)
        and members.elts
        and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in members.elts)
    ):
        return None
    try:
        plan = ast.literal_eval(values["PLAN"]) if "PLAN" in values else {}
    except (TypeError, ValueError, SyntaxError, RecursionError, MemoryError):  # whatever PLAN holds
        plan = {}
    plan = plan if isinstance(plan, dict) else {}
    weights = plan.get("weights") if isinstance(plan.get("weights"), list) else []
    families = [_member_family(e.value) for e in members.elts]
    if len(weights) == len(families) and all(isinstance(w, int | float) for w in weights):
        families = [f"{w:.3g} {family}" for w, family in zip(weights, families, strict=True)]
    how = "weighted vote" if plan.get("vote") else "weighted mean"
    scripts = "1 script" if len(families) == 1 else f"{len(families)} scripts"
    return _clipped(f"Blend of {scripts} ({how}): {', '.join(families)}")


def _member_family(code: str) -> str:
    """A member's model family: a blend's line has no room for more."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "a script that does not parse"
    code, tree = _unwrapped(code, tree)
    return _model(code, tree)[0]
