"""The adapter's run-time shim (untrusted/adapter_shim.py, the very code transplanted into adapted scripts), driven
in-process with small real scikit-learn cases standing in for the transplanted train_model/predict."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

from dsagent_cbr.untrusted import adapter_shim as shim

BASE = {"modality": "tabular", "output": "value", "classes": None, "case": "regression", "case_multi": False,
        "x_kind": "frame", "y_kind": "series", "target": None}


@pytest.fixture
def case(monkeypatch, tmp_path):
    """Install a case: its train_model/predict, the task config, and what the case saw. The shim writes
    a label task's class probabilities into the working folder, as in a sandbox: here a temporary one."""
    seen: dict[str, list] = {"X": [], "y": []}
    monkeypatch.chdir(tmp_path)

    def install(fit, predict, proba=None, **config):
        def train(X_train, y_train, X_valid, y_valid):
            seen["X"].append(X_train)
            seen["y"].append(y_train)
            return fit(X_train, y_train)

        monkeypatch.setattr(shim, "_CBR_TASK", {**BASE, **config})
        monkeypatch.setattr(shim, "_case_train_model", train)
        monkeypatch.setattr(shim, "_case_predict", predict)
        monkeypatch.setattr(shim, "_case_predict_proba", proba)
        return seen

    return install


def data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "kind": rng.choice(["p", "q"], size=n)})
    value = 3 * X["a"] - X["b"] + (X["kind"] == "q") + rng.normal(scale=0.3, size=n)
    return X, value


def split(X, y, cut=240):
    return X.iloc[:cut], X.iloc[cut:], y[:cut], y[cut:]


def test_inputs_take_the_form_the_case_was_written_for():
    index = pd.Index([5, 3, 9])
    series = shim._cbr_as(["x", "y", "z"], "series", index)
    assert isinstance(series, pd.Series) and list(series.index) == [5, 3, 9] and series.iloc[1] == "y"
    assert shim._cbr_as(pd.Series(["x", "y"]), "list") == ["x", "y"]
    assert shim._cbr_as(pd.DataFrame({"t": ["x", "y"]}), "series").tolist() == ["x", "y"]
    frame = shim._cbr_as(np.array([[1, 0], [0, 1], [1, 1]]), "series", index, ["A", "B"])
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == ["A", "B"] and list(frame.index) == [5, 3, 9]
    assert list(shim._cbr_as(pd.Series([1, 2], name="y"), "frame").columns) == ["y"]
    assert isinstance(shim._cbr_as(pd.Series([1.0, 2.0]), "array"), np.ndarray)
    assert shim._cbr_as(np.array([[1.0], [2.0]]), "series").tolist() == [1.0, 2.0]


def test_labels_follow_the_task_classes_then_numbers_then_text(monkeypatch):
    monkeypatch.setattr(shim, "_CBR_TASK", {**BASE, "classes": ["other", "great"]})
    assert shim._cbr_labels(np.array(["great", "other"]), np.array(["other"])) == ["other", "great"]
    monkeypatch.setattr(shim, "_CBR_TASK", BASE)
    assert shim._cbr_labels(np.array([10, 2, 1])) == [1, 2, 10]
    assert shim._cbr_labels(np.array(["yes", "no"])) == ["no", "yes"]
    assert shim._cbr_codes(np.array(["yes", "no", "yes"]), ["no", "yes"]).tolist() == [1, 0, 1]


def test_quantile_bins_cover_both_splits():
    rng = np.random.default_rng(1)
    y_train, y_valid = rng.exponential(size=500), rng.exponential(size=100) * 3
    codes, valid, centers = shim._cbr_bins(y_train, y_valid, 10)
    assert len(centers) == 10 and np.all(np.diff(centers) > 0)
    assert codes.min() == 0 and codes.max() == 9 and valid.min() >= 0 and valid.max() <= 9
    # a value's bin mean follows the value
    assert np.corrcoef(centers[codes], y_train)[0, 1] > 0.9


def test_series_case_gets_series_from_a_list_starter(case):
    seen = case(lambda X, y: {"vocab": set(" ".join(X.fillna("")).split()), "mean": float(y.mean())},
                lambda m, X: np.full(len(X), m["mean"]), modality="text", x_kind="series", y_kind="series")
    X_train, y_train = ["a b", None, "c"], np.array([1.0, 2.0, 3.0])
    model = shim.train_model(X_train, y_train, ["d"], np.array([2.0]))
    assert isinstance(seen["X"][0], pd.Series) and isinstance(seen["y"][0], pd.Series)
    assert list(seen["X"][0].index) == list(seen["y"][0].index)
    assert shim.predict(model, ["e", "f"]).tolist() == [2.0, 2.0]


def test_classification_case_learns_a_regression_target_as_bins(case):
    X, y = data()
    seen = case(lambda X, y: LogisticRegression(max_iter=500).fit(X, y), lambda m, X: m.predict(X),
                proba=lambda m, X: m.predict_proba(X), case="multiclass")
    X_train, X_valid, y_train, y_valid = split(X, y.to_numpy())
    model = shim.train_model(X_train, y_train, X_valid, y_valid)
    assert sorted(set(seen["y"][0])) == list(range(10))  # the case saw bin codes, not values
    pred = shim.predict(model, X_valid)
    assert pred.shape == (60,)
    rmse, spread = np.sqrt(np.mean((pred - y_valid) ** 2)), np.std(y_valid)
    assert rmse < 0.6 * spread, (rmse, spread)


def test_multilabel_case_learns_a_regression_target_as_cumulative_labels(case):
    X, y = data()

    def fit(X, Y):
        return [LogisticRegression(max_iter=500).fit(X, Y[c]) for c in Y.columns]

    seen = case(fit, lambda ms, X: np.column_stack([m.predict_proba(X)[:, 1] for m in ms]),
                case="multilabel", case_multi=True, y_kind="frame")
    X_train, X_valid, y_train, y_valid = split(X, y.to_numpy())
    pred = shim.predict(shim.train_model(X_train, y_train, X_valid, y_valid), X_valid)
    assert seen["y"][0].shape[1] == 9 and np.sqrt(np.mean((pred - y_valid) ** 2)) < 0.6 * np.std(y_valid)


def test_binary_case_on_three_classes_goes_one_vs_rest(case):
    X, y = data()
    labels = np.where(y < -1, "low", np.where(y < 1, "mid", "high"))

    def fit(X, y):  # a binary case: it only ever models the last class against the rest
        return LogisticRegression(max_iter=500).fit(X, (np.asarray(y) == max(set(y))).astype(int))

    seen = case(fit, lambda m, X: m.predict_proba(X)[:, 1], case="binary", output="proba-classes")
    X_train, X_valid, y_train, y_valid = split(X, labels)
    proba = shim.predict(shim.train_model(X_train, y_train, X_valid, y_valid), X_valid)
    assert len(seen["y"]) == 4  # the probe, then one model per class
    assert proba.shape == (60, 3) and np.allclose(proba.sum(axis=1), 1)
    order = ["high", "low", "mid"]
    assert np.mean(np.asarray(order)[proba.argmax(axis=1)] == y_valid) > 0.6


def test_single_output_case_on_several_labels_fits_one_model_per_label(case):
    X, y = data()
    Y = pd.DataFrame({"L1": (y > 0).astype(int), "L2": (X["b"] > 0).astype(int)})
    seen = case(lambda X, y: LogisticRegression(max_iter=500).fit(X, y), lambda m, X: m.predict(X),
                proba=lambda m, X: m.predict_proba(X), case="binary", output="proba")
    X_train, X_valid, y_train, y_valid = split(X, Y.to_numpy())
    proba = shim.predict(shim.train_model(X_train, y_train, X_valid, y_valid), X_valid)
    assert len(seen["y"]) == 2 and proba.shape == (60, 2) and (proba >= 0).all() and (proba <= 1).all()


def test_multilabel_case_on_one_label_gets_one_indicator_per_class(case):
    X, y = data()
    labels = np.where(y > 0, "up", "down")

    def fit(X, Y):
        return [LogisticRegression(max_iter=500).fit(X, Y[c]) for c in Y.columns]

    seen = case(fit, lambda ms, X: np.column_stack([m.predict_proba(X)[:, 1] for m in ms]),
                case="multilabel", case_multi=True, y_kind="frame", output="label")
    X_train, X_valid, y_train, y_valid = split(X, labels)
    pred = shim.predict(shim.train_model(X_train, y_train, X_valid, y_valid), X_valid)
    assert list(seen["y"][0].columns) == ["down", "up"]
    assert set(pred) <= {"up", "down"} and np.mean(pred == y_valid) > 0.8
    # beside the labels, the probabilities behind them, a column per class (for the search's blend)
    scores = pd.read_csv(shim.CBR_CLASS_SCORES)
    assert list(scores.columns) == ["down", "up"] and len(scores) == len(pred)
    assert (scores.columns.to_numpy()[scores.to_numpy().argmax(axis=1)] == pred).all()


def test_regression_case_keeps_a_multi_output_target_in_one_model_or_per_column(case):
    X, y = data()
    Y = np.column_stack([y, 2 * y])
    seen = case(lambda X, y: LinearRegression().fit(X, y), lambda m, X: m.predict(X))
    X_train, X_valid, y_train, y_valid = split(X, Y)
    pred = shim.predict(shim.train_model(X_train, y_train, X_valid, y_valid), X_valid)
    assert len(seen["y"]) == 2 and pred.shape == (60, 2)
    assert np.allclose(pred[:, 1], 2 * pred[:, 0], atol=0.2)


def test_text_columns_the_case_names_reach_it_as_text_the_others_as_codes(case):
    """A case that names a column was written for its values (it maps or encodes them itself); a column
    it never names reaches it as integer codes its model can take."""
    def fit(X, y):
        return LinearRegression().fit(pd.get_dummies(X, columns=["kind"], dtype=float), y)

    def predict(model, X):
        return model.predict(pd.get_dummies(X, columns=["kind"], dtype=float))

    seen = case(fit, predict, named=["kind"])
    X, y = data()
    X["colour"] = np.where(X["a"] > 0, "red", "blue")
    X_train, X_valid, y_train, y_valid = split(X, y)
    model = shim.train_model(X_train, y_train, X_valid, y_valid)
    given = seen["X"][0]
    assert set(given["kind"]) == {"p", "q"} and given["colour"].dtype.kind == "i"
    assert np.isfinite(shim.predict(model, X_valid)).all()


def test_for_a_metric_of_the_log_the_case_learns_log1p_and_never_predicts_below_zero(case):
    seen = case(lambda X, y: LinearRegression().fit(X[["a", "b"]], y),
                lambda model, X: model.predict(X[["a", "b"]]), log_target=True)
    X, value = data()
    price = np.exp(value)  # a positive target spread over orders of magnitude, graded by RMSLE
    X_train, X_valid, y_train, y_valid = split(X, price)
    model = shim.train_model(X_train, y_train, X_valid, y_valid)
    assert np.allclose(np.asarray(seen["y"][0]), np.log1p(y_train))  # the case saw log1p of the target
    predicted = shim.predict(model, X_valid)
    assert (predicted >= 0).all() and np.corrcoef(np.log1p(predicted), np.log1p(y_valid))[0, 1] > 0.9
