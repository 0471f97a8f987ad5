"""The structural adapter: its rewrites of a case's code (fast), and real pairs from the suite in both
layouts, our task folders and their DS-Agent exports, each adapted script run and graded (slow).
benchmarks/adapter_pairs.py runs every pair; these are one or two per modality."""

from __future__ import annotations

import ast
import textwrap

import pytest
from conftest import REPO, prepared

from dsagent_cbr.adapter import AdapterError, CaseSolution, adapt_solution
from dsagent_cbr.adapter.case_inputs import input_kinds
from dsagent_cbr.bank.casefiles import solution_from_folder
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.tasks.export import dsagent_copy


def reference_case(name: str) -> CaseSolution:
    return CaseSolution.from_case(solution_from_folder(REPO / "casebank" / "solutions" / name))


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("dsagent-exports")
    return lambda name: dsagent_copy(prepared(name), root / name)


def transplanted(code: str) -> str:
    """The case's own code in an adapted script (the shim and the starter left out)."""
    start = code.index("def _case_", code.index("_CBR_BINS"))
    return code[start: code.index("# --- end of transplanted code ---")]


def calls(code: str) -> set[str]:
    return {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call)}


def case(script: str, task_type: str = "regression", metric: str = "rmse", modality: str = "tabular") -> CaseSolution:
    return CaseSolution(textwrap.dedent(script), modality, task_type, metric, "handmade")


# --- rewrites --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,kinds", [
    ("bbc-news", ("series", "series")), ("movie-snippets-sentiment", ("series", "frame")),
    ("yeast-multilabel", ("frame", "frame")), ("concrete-strength", ("frame", "series")),
    ("elec-demand", ("array", "array")), ("basic-motions", ("array", "array")),
])
def test_reads_the_input_forms_from_the_case_script(name, kinds):
    assert input_kinds(ast.parse(reference_case(name).script)) == kinds


def test_reads_dsagent_style_input_forms(exports):
    starter = exports("rotten-tomatoes").starter.read_text()
    assert input_kinds(ast.parse(starter)) == ("list", "array")
    assert input_kinds(ast.parse(exports("concrete-strength").starter.read_text())) == ("frame", "array")


def test_regression_case_on_classification_swaps_estimators():
    task = prepared("mlc-churn")
    adapted = adapt_solution(case("""
        from lightgbm import LGBMRegressor
        def train_model(X_train, y_train, X_valid, y_valid):
            return LGBMRegressor(objective='regression', n_estimators=50).fit(X_train, y_train)
        def predict(model, X):
            return model.predict(X)
    """), task)
    assert "LGBMClassifier(" in adapted.code and "objective" not in transplanted(adapted.code)
    assert "def _case_predict_proba(model, X):\n    return model.predict_proba(X)" in adapted.code
    assert any("swapped" in n for n in adapted.notes)


def test_target_transform_never_reaches_class_labels(exports):
    """Issue 17: the diamonds-price case fits on log1p(price); on a classification task that transform
    is stripped from both sides, in either layout, while a regression task keeps it."""
    diamonds = reference_case("diamonds-price")
    for target in (prepared("mlc-churn"), exports("smoke-ban")):
        adapted = adapt_solution(diamonds, target)
        assert not calls(transplanted(adapted.code)) & {"log1p", "expm1"}
        assert any("target transform (log1p, expm1) stripped" in n for n in adapted.notes), adapted.notes
    kept = adapt_solution(diamonds, prepared("hotel-rates"))
    assert {"log1p", "expm1"} <= calls(transplanted(kept.code)) and not kept.notes


def test_metric_arithmetic_on_the_target_is_not_a_transform():
    adapted = adapt_solution(reference_case("movie-snippets-sentiment"), prepared("rotten-tomatoes"))
    assert "sqrt" in calls(transplanted(adapted.code))  # its validation RMSE, not what it fits on
    assert not any("stripped" in n for n in adapted.notes)


def test_half_a_target_transform_is_refused_plainly():
    one_sided = case("""
        import numpy as np
        from sklearn.linear_model import Ridge
        def train_model(X_train, y_train, X_valid, y_valid):
            return Ridge().fit(X_train, np.log(y_train))
        def predict(model, X):
            return model.predict(X)
    """)
    with pytest.raises(AdapterError, match=r"transforms its target \(log\).*cannot find where it undoes it"):
        adapt_solution(one_sided, prepared("smoke-ban"))


def test_box_cox_and_transformed_target_regressor_are_stripped():
    adapted = adapt_solution(case("""
        from scipy import stats
        from scipy.special import inv_boxcox
        from sklearn.compose import TransformedTargetRegressor
        from sklearn.ensemble import RandomForestRegressor
        import numpy as np
        def train_model(X_train, y_train, X_valid, y_valid):
            y_bc, lam = stats.boxcox(y_train + 1)
            model = TransformedTargetRegressor(regressor=RandomForestRegressor(), func=np.sqrt, inverse_func=np.square)
            return {"model": model.fit(X_train, y_bc), "lam": lam}
        def predict(model, X):
            return inv_boxcox(model["model"].predict(X), model["lam"]) - 1
    """), prepared("smoke-ban"))
    code = transplanted(adapted.code)
    assert not calls(code) & {"boxcox", "inv_boxcox", "TransformedTargetRegressor"}
    assert "RandomForestClassifier()" in code and "y_bc, lam = (y_train + 1, None)" in code


def test_multiclass_case_loses_its_pinned_multiclass_loss(exports):
    """pbc-status's booster is pinned to objective="multiclass", which LightGBM refuses on two classes; the
    pin is removed (the label count picks the loss), in either layout (where a binary task's type is
    not even known)."""
    pbc = reference_case("pbc-status")
    assert "multiclass" in pbc.script
    for target in (prepared("smoke-ban"), exports("smoke-ban")):
        adapted = adapt_solution(pbc, target)
        assert "multiclass" not in transplanted(adapted.code) and "multi_logloss" not in adapted.code
        assert any("multi-class loss setting removed" in n for n in adapted.notes)


def test_case_names_never_shadow_the_starter_and_unused_imports_stay_behind(exports):
    dsagent_style = case("""
        import numpy as np
        from sklearn.linear_model import Ridge
        from submission import submit_predictions_for_test_set
        def compute_metric(y_true, y_pred):
            return float(np.mean(np.abs(y_true - y_pred)))
        def train_model(X_train, y_train, X_valid, y_valid):
            model = Ridge().fit(X_train, y_train)
            print("valid", compute_metric(y_valid, model.predict(X_valid)))
            return model
        def predict(model, X):
            return model.predict(X)
    """)
    target = exports("concrete-strength")
    code = adapt_solution(dsagent_style, target).code
    assert "def _case_compute_metric(" in code and "_case_compute_metric(y_valid" in code
    assert code.count("def compute_metric(") == 1 and "Root mean squared error" in code
    ours = adapt_solution(dsagent_style, prepared("concrete-strength")).code
    assert "from submission import" not in ours


def test_says_plainly_when_it_cannot_apply():
    task = prepared("concrete-strength")
    with pytest.raises(AdapterError, match="text and the task is tabular"):
        adapt_solution(case("def train_model(a, b, c, d):\n    pass\ndef predict(m, X):\n    pass\n",
                            "binary-classification", "accuracy", "text"), task)
    with pytest.raises(AdapterError, match="no predict"):
        adapt_solution(case("def train_model(a, b, c, d):\n    pass\n"), task)


# --- real pairs, both layouts ----------------------------------------------------------------------

# (case, target, layouts): every modality in both layouts; the slower text pairs once each.
PAIRS = [
    ("diamonds-price", "smoke-ban", "cbr dsagent"),     # tabular: log1p regression case on binary accuracy
    ("mlc-churn", "concrete-strength", "cbr dsagent"),  # tabular: binary case on a regression task (bins)
    ("pbc-status", "titanic-survival", "cbr dsagent"),  # tabular: multi-class LightGBM case on a binary task
    ("rotten-tomatoes", "fine-foods-rating", "dsagent"),  # text: a Series case; DS-Agent's starter passes lists
    ("movie-snippets-sentiment", "trump-tweets-device", "cbr"),  # text: two-target regression case, log loss
    ("us-gasoline", "taylor-demand", "cbr dsagent"),    # forecasting
    ("japanese-vowels", "pickup-gesture", "cbr dsagent"),  # time-series classification
]
RUNS = [(s, t, layout) for s, t, layouts in PAIRS for layout in layouts.split()]


@pytest.mark.slow
@pytest.mark.parametrize("source,target,layout", RUNS, ids=[f"{s}->{t}-{x}" for s, t, x in RUNS])
def test_adapted_solution_runs_and_beats_the_starter(source, target, layout, exports, tmp_path):
    task = prepared(target) if layout == "cbr" else exports(target)
    adapted = adapt_solution(reference_case(source), task)
    result = run_script(task, adapted.code, run_dir=tmp_path / "adapted", timeout=300)
    assert result.ok, f"{result.status}: {result.error}\n{result.stderr[-2000:]}"
    starter = run_script(task, task.starter, run_dir=tmp_path / "starter")
    assert task.metric.better(result.test_metric, starter.test_metric), (result.test_metric, starter.test_metric)
