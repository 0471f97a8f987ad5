"""The one-line summary of a training script: its model, key parameters and feature steps, read by AST."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsagent_cbr.adapter import CaseSolution, adapt_solution
from dsagent_cbr.agent.script_summary import MAX_CHARS, NOT_PARSED, TOO_DEEP, summarise_script
from dsagent_cbr.tasks.loader import load_task

REPO = Path(__file__).resolve().parents[1]
REAL_SCRIPTS = sorted([*REPO.glob("benchmarks/references/*.py"), *REPO.glob("casebank/solutions/*/*.py")])
GENERAL_TABULAR = REPO / "dsagent_cbr/untrusted/general_tabular.py"

LIGHTGBM_TABLE = '''
import lightgbm as lgb
import pandas as pd

def features(X):
    X = X.copy()
    X["month"] = pd.to_datetime(X["date"]).dt.month
    X["city"] = X["city"].astype("category")
    return X

def train_model(X_train, y_train, X_valid, y_valid):
    model = lgb.LGBMRegressor(n_estimators=500, learning_rate=0.05, random_state=0)
    return model.fit(features(X_train), y_train)
'''

TFIDF_TEXT = '''
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

def train_model(X_train, y_train, X_valid, y_valid):
    columns = ColumnTransformer([("text", TfidfVectorizer(ngram_range=(1, 2)), "review"),
                                 ("city", OneHotEncoder(handle_unknown="ignore"), ["city"])])
    return make_pipeline(columns, LogisticRegression(C=1.0)).fit(X_train, y_train)
'''

LOG_TARGET = '''
import numpy as np
from sklearn.linear_model import Ridge

def train_model(X_train, y_train, X_valid, y_valid):
    return Ridge(alpha=1.0).fit(X_train, np.log1p(y_train))

def predict(model, X):
    return np.expm1(model.predict(X))
'''


@pytest.mark.parametrize(("code", "line"), [
    (LIGHTGBM_TABLE,
     "LightGBM (n_estimators=500, learning_rate=0.05); features: native categoricals, date parts"),
    (TFIDF_TEXT, "Logistic regression (C=1.0); features: TF-IDF of text, one-hot"),
    (LOG_TARGET, "Ridge (alpha=1.0); features: log target"),
    ("from sklearn.linear_model import Ridge\nmodel = Ridge(alpha=1.0).fit(X, y)",
     "Ridge (alpha=1.0); features: as given"),
    ("", "model unknown; features: as given"),
    ("import numpy as np\npredictions = np.full(10, 3.0)", "model unknown; features: as given"),
])
def test_summary_of_small_scripts(code, line):
    assert summarise_script(code) == line


@pytest.mark.parametrize("code", ["def broken(:\n", "this is not python at all ) ( ]", "x = 'unclosed",
                                  "a\x00b", "\ufeff\ufeff", "-" * 100_000 + "1"])
def test_text_that_does_not_parse_gives_the_plain_fallback(code):
    assert summarise_script(code) == NOT_PARSED


def test_an_expression_too_deep_to_unparse_still_gives_a_line():
    # parses (a chain of attributes is no nesting to the parser) but ast.unparse recurses through it
    assert summarise_script("import numpy as np\nz = np.log1p(y" + ".a" * 1_000 + ")") == TOO_DEEP


@pytest.mark.parametrize(("code", "step"), [
    ("v = CountVectorizer(analyzer='char_wb')", "TF-IDF of text, character n-grams"),
    ("X = pd.get_dummies(X)", "one-hot"),
    ("X['c'] = OrdinalEncoder().fit_transform(X[['c']])", "categories as codes"),
    ("y = LabelEncoder().fit_transform(y)", "categories as codes"),
    ("pool = Pool(X, y, cat_features=[0, 1])", "native categoricals"),
    ("X = SimpleImputer(strategy='median').fit_transform(X)", "imputed"),
    ("X = X.fillna(X.median())", "imputed"),
    ("texts = X['text'].fillna('')", "as given"),  # blank text for the missing: nothing is estimated
    ("X = StandardScaler().fit_transform(X)", "scaled"),
    ("X = PolynomialFeatures(degree=2).fit_transform(X)", "polynomial features"),
    ("X = TruncatedSVD(n_components=100).fit_transform(X)", "SVD"),
    ("X = PCA(n_components=10).fit_transform(X)", "PCA"),
    ("X['c'] = TargetEncoder().fit_transform(X[['c']], y)", "target encoding"),
    ("X['wd'] = when.dt.dayofweek", "date parts"),
    ("X['lag1'] = X['sales'].shift(1)", "lags"),
    ("X['mean7'] = X['sales'].rolling(7).mean()", "rolling stats"),
    ("X['area'] = np.log1p(X['area'])", "log features"),  # a feature's log, not the target's
    ("model.fit(X, np.log(train_y))", "log target"),
    ("p = np.exp(model.predict(X))", "log target"),
    ("X['ratio'] = X['water'] / X['cement']", "derived columns"),
    ("f = np.column_stack([x.mean(axis=1), x.std(axis=1)])", "row statistics"),
    ("p = p / p.sum(axis=1, keepdims=True)", "as given"),  # normalising probabilities is no feature
    ("scaled = (f - f.mean(axis=0)) / f.std(axis=0)", "as given"),  # column statistics, for scaling
    ("def design(X):\n    return X[:, -24:]", "hand-made in design()"),  # a feature function, nothing known
])
def test_feature_steps_from_calls_and_idioms(code, step):
    assert summarise_script(code) == f"model unknown; features: {step}"


def test_steps_taken_only_under_a_condition_come_after_if_present():
    # a general solution: TF-IDF for the text columns and categoricals for the category columns a table has
    code = ("texts = {c: TfidfVectorizer().fit(X[c]) for c, k in kinds.items() if k == 'text'}\n"
            "for c, k in kinds.items():\n    if k == 'category':\n        X[c] = X[c].astype('category')\n"
            "X = X.fillna(0)\nm = LGBMRegressor(num_leaves=7)\n"
            "if __name__ == '__main__':\n    X['x2'] = X['a'] * X['b']\n")  # a script's main is no condition
    assert summarise_script(code) == ("LightGBM (num_leaves=7); features: derived columns, imputed; "
                                      "if present: TF-IDF of text, native categoricals")
    line = summarise_script(GENERAL_TABULAR.read_text(encoding="utf-8"))
    assert line.startswith("LightGBM (n_estimators=5000, learning_rate=0.05, ")
    assert line.endswith("; features if present: TF-IDF of text, native categoricals, categories as codes, "
                         "date parts")


def test_an_adapted_script_is_summarised_without_the_adapters_shim():
    case = (REPO / "casebank/solutions/diamonds-price/solution.py").read_text(encoding="utf-8")
    adapted = adapt_solution(CaseSolution(case, "tabular", "regression", "rmsle", "diamonds-price"),
                             load_task(REPO / "tasks/hotel-rates")).code
    assert "_cbr_" in adapted  # the shim encodes categoricals and decodes outputs for every transplant
    assert summarise_script(adapted) == summarise_script(case)
    assert summarise_script(case).endswith("; features: native categoricals, log target")


def test_a_blend_names_its_members_and_their_weights():
    members = [(REPO / "casebank/solutions/diamonds-price/solution.py").read_text(encoding="utf-8"),
               "from xgboost import XGBRegressor\nm = XGBRegressor(max_depth=6)", "def broken(:"]
    code = f"PLAN = {{'vote': False, 'weights': [0.5, 0.3, 0.2]}}\nMEMBERS = {members!r}\n"
    assert summarise_script(code) == ("Blend of 3 scripts (weighted mean): 0.5 LightGBM, 0.3 XGBoost, "
                                      "0.2 a script that does not parse")
    code = f"PLAN = {{'vote': True, 'weights': [1]}}\nMEMBERS = {members[1:2]!r}\n"
    assert summarise_script(code) == "Blend of 1 script (weighted vote): 1 XGBoost"
    # a PLAN that is no literal: the members without weights
    assert summarise_script("PLAN = {[1]: 2}\nMEMBERS = ['']") == ("Blend of 1 script (weighted mean): "
                                                                 "model unknown")
    # the blend's template, before the search fills it, is no blend yet
    blend = (REPO / "dsagent_cbr/untrusted/blend.py").read_text(encoding="utf-8")
    assert summarise_script(blend) == "model unknown; features: as given"


def test_wrappers_follow_the_model_and_features_are_not_repeated():
    code = ("search = GridSearchCV(make_pipeline(TfidfVectorizer(), LogisticRegression(C=4.0)), grid)\n"
            "model = search.fit(X, y)")
    assert summarise_script(code) == "Logistic regression (C=4.0) via grid search; features: TF-IDF of text"


def test_estimators_imported_and_called_through_a_variable_give_their_family():
    code = ("from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier\n"
            "fits = [forest(n_estimators=500).fit(X, y)\n"
            "        for forest in (RandomForestClassifier, ExtraTreesClassifier)]")
    assert summarise_script(code) == "Extra trees + Random forest; features: as given"


def test_a_long_summary_gives_up_parameters_first_and_stays_one_line():
    params = ", ".join(f"p{i}={i}" for i in range(40))
    steps = "X = pd.get_dummies(X)\nX = StandardScaler().fit_transform(X)\n"
    line = summarise_script(f"{steps}m = LGBMRegressor({params})")
    assert len(line) <= MAX_CHARS and "\n" not in line
    assert line.startswith("LightGBM (p0=0, ") and line.endswith(", …); features: one-hot, scaled")
    many = "\n".join(f"X{i} = StandardScaler{i}()" for i in range(3)) + "\n" + "\n".join(
        f"def very_long_feature_function_name_{i}(X):\n    return X" for i in range(2))
    assert len(summarise_script(many * 30)) <= MAX_CHARS
    # a parameter's value holding a newline stays on the line
    assert "\n" not in summarise_script("m = Ridge(alpha=f'''1\n2''')")


def _name(path: Path) -> str:
    return path.parent.name if path.name == "solution.py" else path.stem


@pytest.mark.parametrize("path", REAL_SCRIPTS, ids=_name)
def test_real_scripts_each_give_a_sensible_line(path):
    line = summarise_script(path.read_text(encoding="utf-8"))
    assert "\n" not in line and len(line) <= MAX_CHARS
    assert not line.startswith("model unknown") and "; features: " in line


def test_real_scripts_say_what_they_do():
    lines = {_name(p): summarise_script(p.read_text(encoding="utf-8")) for p in REAL_SCRIPTS}
    assert len(lines) >= 25
    assert lines["diamonds-price"].startswith("LightGBM (n_estimators=3000, ")
    assert lines["diamonds-price"].endswith("features: native categoricals, log target")
    assert lines["hotel-rates"].endswith("features: native categoricals, date parts, derived columns")
    assert lines["bbc-news"] == ("Logistic regression (C=one of (4.0, 16.0), max_iter=3000); "
                                 "features: TF-IDF of text, character n-grams")
    assert lines["smoke-ban"] == ("Logistic regression + HistGradientBoosting (C=?, max_iter=2000); "
                                  "features: one-hot, scaled")
    assert lines["pickup-gesture"].startswith("Extra trees + Random forest; ")
    assert "log target" not in lines["pbc-status"]  # log1p of laboratory values, not of the target


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_one_line(code):
    line = summarise_script(code)
    assert isinstance(line, str) and "\n" not in line and 0 < len(line) <= MAX_CHARS


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(REAL_SCRIPTS), st.integers(min_value=0), st.integers(min_value=0))
def test_pieces_of_real_scripts_give_one_line(path, start, length):
    text = path.read_text(encoding="utf-8")
    start %= len(text)
    line = summarise_script(text[start:start + length % 3000])
    assert "\n" not in line and 0 < len(line) <= MAX_CHARS
