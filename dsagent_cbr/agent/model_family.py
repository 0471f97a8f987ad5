"""What model a script trains, read from its source by AST (never by running it).

`describe_model(code)` finds the estimator constructors a script calls (scikit-learn, LightGBM, XGBoost,
CatBoost, statsmodels, sktime/aeon, PyTorch `nn.Module` subclasses, Keras models) and returns the model
family with the key parameters of the first one, e.g. `LGBMRegressor(n_estimators=500, learning_rate=0.05)`
gives ("LightGBM", "n_estimators=500, learning_rate=0.05"). Parameters written as `**PARAMS` are read from
the script's `PARAMS = dict(...)` or `{...}` assignment. A script with none of these is "unknown"."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from dsagent_cbr.python_syntax import parse as parse_python

UNKNOWN = "unknown"

# constructor name -> family; names matched exactly, then the patterns below
_NAMES = {
    "LinearRegression": "Linear regression",
    "Ridge": "Ridge",
    "RidgeCV": "Ridge",
    "RidgeClassifier": "Ridge",
    "RidgeClassifierCV": "Ridge",
    "Lasso": "Lasso",
    "LassoCV": "Lasso",
    "ElasticNet": "Elastic net",
    "ElasticNetCV": "Elastic net",
    "BayesianRidge": "Bayesian ridge",
    "HuberRegressor": "Huber regression",
    "QuantileRegressor": "Quantile regression",
    "PoissonRegressor": "Poisson regression",
    "TweedieRegressor": "Tweedie regression",
    "LogisticRegression": "Logistic regression",
    "LogisticRegressionCV": "Logistic regression",
    "SGDClassifier": "SGD linear model",
    "SGDRegressor": "SGD linear model",
    "Perceptron": "Perceptron",
    "PassiveAggressiveClassifier": "Passive-aggressive",
    "RandomForestClassifier": "Random forest",
    "RandomForestRegressor": "Random forest",
    "ExtraTreesClassifier": "Extra trees",
    "ExtraTreesRegressor": "Extra trees",
    "GradientBoostingClassifier": "Gradient boosting (sklearn)",
    "GradientBoostingRegressor": "Gradient boosting (sklearn)",
    "HistGradientBoostingClassifier": "HistGradientBoosting",
    "HistGradientBoostingRegressor": "HistGradientBoosting",
    "AdaBoostClassifier": "AdaBoost",
    "AdaBoostRegressor": "AdaBoost",
    "DecisionTreeClassifier": "Decision tree",
    "DecisionTreeRegressor": "Decision tree",
    "KNeighborsClassifier": "k-nearest neighbours",
    "KNeighborsRegressor": "k-nearest neighbours",
    "SVC": "SVM",
    "SVR": "SVM",
    "NuSVC": "SVM",
    "NuSVR": "SVM",
    "LinearSVC": "Linear SVM",
    "LinearSVR": "Linear SVM",
    "MLPClassifier": "MLP (sklearn)",
    "MLPRegressor": "MLP (sklearn)",
    "GaussianNB": "Naive Bayes",
    "MultinomialNB": "Naive Bayes",
    "ComplementNB": "Naive Bayes",
    "BernoulliNB": "Naive Bayes",
    "KernelRidge": "Kernel ridge",
    "GaussianProcessClassifier": "Gaussian process",
    "GaussianProcessRegressor": "Gaussian process",
    "LinearDiscriminantAnalysis": "LDA",
    "QuadraticDiscriminantAnalysis": "QDA",
    "DummyClassifier": "Dummy baseline",
    "DummyRegressor": "Dummy baseline",
    # statsmodels
    "ARIMA": "statsmodels ARIMA",
    "SARIMAX": "statsmodels SARIMAX",
    "AutoReg": "statsmodels AutoReg",
    "ExponentialSmoothing": "statsmodels exponential smoothing",
    "SimpleExpSmoothing": "statsmodels exponential smoothing",
    "Holt": "statsmodels exponential smoothing",
    "ETSModel": "statsmodels ETS",
    "VAR": "statsmodels VAR",
    "ThetaModel": "statsmodels Theta",
    "UnobservedComponents": "statsmodels unobserved components",
    "OLS": "statsmodels OLS",
    "WLS": "statsmodels WLS",
    "GLM": "statsmodels GLM",
    "Logit": "statsmodels Logit",
    "Probit": "statsmodels Probit",
    "MNLogit": "statsmodels MNLogit",
    "QuantReg": "statsmodels quantile regression",
    # sktime / aeon
    "Rocket": "ROCKET",
    "MiniRocket": "ROCKET",
    "MultiRocket": "ROCKET",
    "RocketClassifier": "ROCKET",
    "NaiveForecaster": "Naive forecaster",
}
_PATTERNS = [
    (re.compile(p), family)
    for p, family in (
        (r"^LGBM", "LightGBM"),
        (r"^XGB", "XGBoost"),
        (r"^CatBoost", "CatBoost"),
        (
            r"(Classifier|Regressor|Forecaster)$",
            "",
        ),  # any other estimator: its own name is its family
    )
]
# meta-estimators: they wrap the models that name the family
_WRAPPERS = {
    "VotingClassifier": "voting",
    "VotingRegressor": "voting",
    "StackingClassifier": "stacking",
    "StackingRegressor": "stacking",
    "BaggingClassifier": "bagging",
    "BaggingRegressor": "bagging",
    "GridSearchCV": "grid search",
    "RandomizedSearchCV": "random search",
    "HalvingGridSearchCV": "grid search",
    "OneVsRestClassifier": "one-vs-rest",
    "MultiOutputClassifier": "multi-output",
    "MultiOutputRegressor": "multi-output",
    "ClassifierChain": "chain",
    "RegressorChain": "chain",
    "CalibratedClassifierCV": "calibrated",
    "TransformedTargetRegressor": "transformed target",
}
_FEATURES = {
    "TfidfVectorizer": "TF-IDF",
    "CountVectorizer": "word counts",
    "HashingVectorizer": "hashed words",
    "SentenceTransformer": "sentence embeddings",
}
# module functions that train a model from a parameter dict: (module, function) -> family
_TRAIN_FUNCTIONS = {
    ("lightgbm", "train"): "LightGBM",
    ("xgboost", "train"): "XGBoost",
    ("catboost", "train"): "CatBoost",
}
_NN_LAYERS = re.compile(
    r"^(Linear|Conv[123]d|Conv[123]D|LSTM|GRU|RNN|Transformer\w*|MultiheadAttention|Embedding|"
    r"Dense|SimpleRNN|Attention|MultiHeadAttention|BatchNorm\w*|Dropout)$"
)
# settings that do not describe the model
_NOISE = {
    "random_state",
    "n_jobs",
    "verbose",
    "verbosity",
    "seed",
    "random_seed",
    "silent",
    "thread_count",
    "nthread",
    "n_threads",
    "logging_level",
    "allow_writing_files",
    "device",
    "callbacks",
}
MAX_PARAMS = 6


@dataclass(frozen=True)
class ModelInfo:
    family: str
    params: str  # "key=value, ..." of the first model; "" when none are written out


def _name(func: ast.expr) -> str:
    return (
        func.attr
        if isinstance(func, ast.Attribute)
        else func.id
        if isinstance(func, ast.Name)
        else ""
    )


def _family(name: str) -> str | None:
    if name in _NAMES:
        return _NAMES[name]
    for pattern, family in _PATTERNS:
        if pattern.search(name):
            return family or name
    return None


class _Reader:
    def __init__(self, tree: ast.Module) -> None:
        self.modules: dict[str, str] = {}  # local name -> top-level module ("lgb" -> "lightgbm")
        self.dicts: dict[str, ast.expr] = {}  # NAME = dict(...) / {...}: the first assignment wins
        # module-level NAME = 3.0, "l2", (1, 2): a parameter's value
        self.values: dict[str, ast.expr] = {}
        # `for C in (1.0, 4.0):`: a parameter a script tries several values of, choosing among them itself
        self.tried: dict[str, ast.expr] = {
            n.target.id: n.iter
            for n in ast.walk(tree)
            if isinstance(n, ast.For) and isinstance(n.target, ast.Name) and _literal(n.iter)
        }
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and _literal(node.value)
            ):
                self.values.setdefault(node.targets[0].id, node.value)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.modules[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[
                        0
                    ]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    self.modules[alias.asname or alias.name] = node.module.split(".")[0]
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and (
                    isinstance(node.value, ast.Dict)
                    or (isinstance(node.value, ast.Call) and _name(node.value.func) == "dict")
                )
            ):
                self.dicts.setdefault(node.targets[0].id, node.value)

    def keywords(self, mapping: ast.expr | None, depth: int = 0) -> list[tuple[str, ast.expr]]:
        """(key, value) pairs of a dict literal, dict(...) call or a name bound to one."""
        if isinstance(mapping, ast.Name) and depth < 3:
            return self.keywords(self.dicts.get(mapping.id), depth + 1)
        if isinstance(mapping, ast.Dict):
            return [
                (k.value, v)
                for k, v in zip(mapping.keys, mapping.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
        if isinstance(mapping, ast.Call):
            return self.call_keywords(mapping, depth + 1)
        return []

    def call_keywords(self, call: ast.Call, depth: int = 0) -> list[tuple[str, ast.expr]]:
        pairs: list[tuple[str, ast.expr]] = []
        for kw in call.keywords:
            pairs += [(kw.arg, kw.value)] if kw.arg else self.keywords(kw.value, depth)
        return pairs

    def render(self, pairs: list[tuple[str, ast.expr]]) -> str:
        """key=value for the parameters that say something of the model; a name bound at module level
        shows its value, any other name shows that the value is not known here."""
        shown = [(k, v) for k, v in pairs if k not in _NOISE]
        text = [f"{k}={_short(self._value(v))}" for k, v in shown[:MAX_PARAMS]]
        return ", ".join(text) + (", …" if len(shown) > MAX_PARAMS else "")

    def _value(self, node: ast.expr) -> str:
        if isinstance(node, ast.Name):
            if node.id in self.tried:
                return "one of " + ast.unparse(self.tried[node.id])
            return ast.unparse(self.values[node.id]) if node.id in self.values else "?"
        return ast.unparse(node)

    def train_function(self, call: ast.Call) -> str | None:
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            return _TRAIN_FUNCTIONS.get((self.modules.get(func.value.id, func.value.id), func.attr))
        return None


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


def _short(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_OPTIMIZERS = {"Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Nadam"}


def _neural_network(
    tree: ast.Module, calls: list[ast.Call], modules: dict[str, str]
) -> ModelInfo | None:
    """PyTorch (an nn.Module subclass or nn.* layers) or Keras (Sequential or layers with keras imported)."""
    names = [_name(c.func) for c in calls]
    torch = any(
        isinstance(c, ast.ClassDef) and any(ast.unparse(b).endswith("Module") for b in c.bases)
        for c in ast.walk(tree)
    ) or any(ast.unparse(c.func).startswith(("nn.", "torch.nn.")) for c in calls)
    keras = not torch and (
        "Sequential" in names or bool({"keras", "tensorflow"} & set(modules.values()))
    )
    layers = _unique([n for n in names if _NN_LAYERS.match(n)])
    if not (torch or (keras and layers)):
        return None
    params = ["layers: " + ", ".join(layers)] if layers else []
    for call, name in zip(calls, names, strict=True):
        if name in _OPTIMIZERS:
            rate = [ast.unparse(k.value) for k in call.keywords if k.arg in ("lr", "learning_rate")]
            params.append(f"{name}" + (f" lr={rate[0]}" if rate else ""))
            break
    return ModelInfo("PyTorch" if torch else "Keras", "; ".join(params))


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _conditional_calls(tree: ast.Module) -> set[ast.Call]:
    """Calls made only under a condition: a general solution builds TF-IDF features for the text columns
    a table has, and a table without any has none."""
    guarded = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.IfExp)
        or (
            isinstance(node, ast.If) and "__name__" not in ast.unparse(node.test)
        )  # not a script's main
        or (
            isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp)
            and any(g.ifs for g in node.generators)
        )
    ]
    return {call for node in guarded for call in ast.walk(node) if isinstance(call, ast.Call)}


def describe_model(code: str) -> ModelInfo:
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return ModelInfo(UNKNOWN, "")
    reader = _Reader(tree)
    calls = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    models: list[tuple[str, str]] = []  # (family, params)
    wrappers = []
    features = []
    conditional = _conditional_calls(tree)
    for call in calls:
        name = _name(call.func)
        if name in _WRAPPERS:
            wrappers.append(_WRAPPERS[name])
        elif name in _FEATURES:
            features.append(_FEATURES[name] + (" where it applies" if call in conditional else ""))
        elif family := reader.train_function(call):
            params = (
                call.args[0]
                if call.args
                else next((k.value for k in call.keywords if k.arg == "params"), None)
            )
            models.append((family, reader.render(reader.keywords(params))))
        elif family := _family(name):
            models.append((family, reader.render(reader.call_keywords(call))))
    network = _neural_network(tree, calls, reader.modules)
    if network is not None:
        models.insert(0, (network.family, network.params))
    if not models:
        return ModelInfo(UNKNOWN, "")
    families = _unique([f for f, _ in models])
    family = " + ".join(families[:3]) + (" + …" if len(families) > 3 else "")
    notes = _unique(wrappers) + [f"on {f}" for f in _unique(features)]
    return ModelInfo(family + (f" ({', '.join(notes)})" if notes else ""), models[0][1])
