"""Runs untrusted, inside the sandbox, as `cbr bench`'s AutoGluon anchor. AutoGluon Tabular's train_model
and predict, spliced by bench/autogluon_script.py into a task's starter in place of the random guess; the
settings block below is rewritten for each task. The rest of the starter (loading, the fixed validation
split, scoring, writing predictions) stays as the task ships it. It runs under the python that has
AutoGluon (bench/autogluon_script.py says which)."""

import atexit
import importlib
import itertools
import os
import shutil

import numpy as np
import pandas as pd

# --- settings (written by cbr bench) ---
AUTOGLUON_BUDGET = 60.0  # seconds: fit's time_limit for the whole run, split evenly over the targets
AUTOGLUON_PRESETS = "medium_quality"
AUTOGLUON_TASK = "classification"  # classification (binary or multiclass, from the labels) | regression
AUTOGLUON_METRIC = "accuracy"  # AutoGluon's eval_metric
AUTOGLUON_OUTPUT = "labels"  # labels | positive | classes | values
AUTOGLUON_CLASSES = []  # positive: [negative, positive]; classes: the column order predict returns
AUTOGLUON_TEXT = False  # text tasks: one string column, which AutoGluon's n-gram featurizer reads
AUTOGLUON_LOG_TARGET = False  # rmsle: fit on log1p(y) with RMSE and undo it in predict
# --- end of settings ---

MODELS = "AutogluonModels"  # in the workspace, under its disk limit; removed when the script ends
LABEL = "cbr_target"
# Neural networks: AutoGluon trains them whenever torch imports, and here it would only because cbr's own
# environment has torch; AutoGluon Tabular with the lightgbm, catboost and xgboost extras has none.
EXCLUDED = ["NN_TORCH", "FASTAI"]
_FITS = itertools.count()
# the predictors read their models from disk at every predict, so they go only when the script is done
atexit.register(shutil.rmtree, MODELS, ignore_errors=True)


def _frame(X):
    if AUTOGLUON_TEXT:
        return pd.DataFrame({"text": pd.Series(X).fillna("").astype(str).to_numpy(dtype=object)})
    return pd.DataFrame(X).reset_index(drop=True)


def _target(y):
    values = pd.Series(np.asarray(y))
    if AUTOGLUON_OUTPUT == "positive":
        positive = str(AUTOGLUON_CLASSES[-1] if AUTOGLUON_CLASSES else 1).lower()
        return values.map(lambda v: int(str(v).lower() in (positive, "1", "true", "yes")))
    if AUTOGLUON_TASK == "regression":
        values = values.astype(float)
        return np.log1p(values) if AUTOGLUON_LOG_TARGET else values
    return values


def _learned(X_train, X_valid):
    """Are the validation rows among the training rows (the starter's refit, CBR_REFIT)? Then they can
    tune nothing, and AutoGluon holds out rows of its own."""
    index = getattr(X_valid, "index", None)
    return index is not None and hasattr(X_train, "index") and bool(index.isin(X_train.index).all())


def _fit(train, y, valid, y_valid, seconds):
    tabular = importlib.import_module("autogluon.tabular")  # by name: see bench/autogluon_script.py's docstring
    if AUTOGLUON_TASK == "regression":
        problem = "regression"
    else:
        problem = "binary" if AUTOGLUON_OUTPUT == "positive" or y.nunique() == 2 else "multiclass"
    metadata = tabular.FeatureMetadata.from_df(train)
    if AUTOGLUON_TEXT and "text" not in metadata.get_feature_types_special("text"):
        # the text column is text whatever its length: AutoGluon's own guess takes short strings for categories
        metadata = metadata.add_special_types({"text": ["text"]})
    predictor = tabular.TabularPredictor(label=LABEL, problem_type=problem, eval_metric=AUTOGLUON_METRIC,
                                         path=os.path.join(MODELS, f"fit-{next(_FITS)}"), verbosity=1)
    tuning = None if valid is None else valid.assign(**{LABEL: y_valid.to_numpy()})
    predictor.fit(train.assign(**{LABEL: y.to_numpy()}), tuning_data=tuning, time_limit=seconds,
                  presets=AUTOGLUON_PRESETS, feature_metadata=metadata, excluded_model_types=EXCLUDED,
                  num_cpus=int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1), num_gpus=0,
                  keep_only_best=True, save_space=True)
    return predictor


def train_model(X_train, y_train, X_valid, y_valid):
    targets = list(y_train.columns) if isinstance(y_train, pd.DataFrame) else [None]
    tune = not _learned(X_train, X_valid)
    train, valid = _frame(X_train), (_frame(X_valid) if tune else None)
    predictors = []
    for column in targets:
        y_fit, y_val = (y_train, y_valid) if column is None else (y_train[column], y_valid[column])
        predictor = _fit(train, _target(y_fit), valid, _target(y_val) if tune else None,
                         AUTOGLUON_BUDGET / len(targets))
        board = predictor.leaderboard(silent=True)
        best = board.loc[board["model"] == predictor.model_best, "score_val"]
        print(f"AutoGluon {column or 'target'}: {predictor.model_best}, its validation score "
              f"{float(best.iloc[0]):.6g} ({AUTOGLUON_METRIC}, higher is better)")
        predictors.append(predictor)
    return {"predictors": predictors}


def _output(predictor, table):
    if AUTOGLUON_OUTPUT == "labels":
        return predictor.predict(table).to_numpy()
    if AUTOGLUON_OUTPUT == "values":
        values = predictor.predict(table).to_numpy(dtype=float)
        return np.expm1(values) if AUTOGLUON_LOG_TARGET else values
    proba = predictor.predict_proba(table, as_multiclass=True)
    if AUTOGLUON_OUTPUT == "positive":
        return proba[1].to_numpy() if 1 in proba.columns else np.zeros(len(table))
    known = {str(c): c for c in proba.columns}  # a class the training rows never had gets probability 0
    return np.column_stack([proba[known[str(c)]].to_numpy() if str(c) in known else np.zeros(len(table))
                            for c in AUTOGLUON_CLASSES or list(proba.columns)])


def predict(model, X):
    table = _frame(X)
    outputs = [_output(predictor, table) for predictor in model["predictors"]]
    return outputs[0] if len(outputs) == 1 else np.column_stack(outputs)
