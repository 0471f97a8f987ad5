"""Runs untrusted, inside the sandbox, as `cbr bench`'s AutoML anchor. FLAML's train_model and predict, spliced by flaml_script.py into a task's starter in place of the
random guess; the settings block below is rewritten for each task. The rest of the starter (loading,
the fixed validation split, scoring, writing predictions) stays as the task ships it. With FLAML_SEARCH
off it fits LightGBM as it comes on the same table instead: an anchor that differs from FLAML's in the
search alone."""

import os

import numpy as np
import pandas as pd

# --- settings (written by cbr bench) ---
FLAML_BUDGET = 60.0  # seconds for the whole search, split evenly over the targets
FLAML_SEED = 0
FLAML_TASK = "classification"  # classification | regression
FLAML_METRIC = "accuracy"  # FLAML's name of the metric searched on
FLAML_OUTPUT = "labels"  # labels | positive | classes | values
FLAML_CLASSES = []  # positive: [negative, positive]; classes: the column order predict returns
FLAML_TEXT = False  # text tasks: a TF-IDF front end turns the strings into a sparse table
FLAML_LOG_TARGET = False  # rmsle: search on log1p(y) with rmse and undo it in predict
FLAML_SEARCH = True  # False: no search, LightGBM as it comes on the same table (flaml_script.lightgbm_script)
# --- end of settings ---


def _table(model, X):
    if FLAML_TEXT:
        return model["tfidf"].transform(pd.Series(X).fillna("").astype(str))
    X = pd.DataFrame(X).copy()
    for column, categories in model["categories"].items():
        X[column] = pd.Categorical(X[column].astype(object), categories=categories)
    return X


def _target(y, labels):
    """The target as FLAML gets it: 0/1 for a positive class, codes 0..k-1 for labels (FLAML hands
    string labels on to XGBoost unchanged with sparse input, and XGBoost 3 refuses them)."""
    values = np.asarray(y, dtype=object)
    if FLAML_OUTPUT == "positive":
        positive = FLAML_CLASSES[-1] if FLAML_CLASSES else 1
        return np.array([str(v).lower() in (str(positive).lower(), "1", "true", "yes") for v in values], dtype=int)
    if FLAML_TASK == "regression":
        values = values.astype(float)
        return np.log1p(values) if FLAML_LOG_TARGET else values
    return np.searchsorted(labels, values.astype(str))


def train_model(X_train, y_train, X_valid, y_valid):
    model = {"automl": [], "labels": []}
    if FLAML_TEXT:
        from sklearn.feature_extraction.text import TfidfVectorizer

        model["tfidf"] = TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=50000, sublinear_tf=True)
        model["tfidf"].fit(pd.Series(X_train).fillna("").astype(str))
    else:
        model["categories"] = {c: sorted(X_train[c].dropna().astype(str).unique()) for c in X_train.columns
                               if not pd.api.types.is_numeric_dtype(X_train[c])}
    train, valid = _table(model, X_train), _table(model, X_valid)
    targets = list(y_train.columns) if isinstance(y_train, pd.DataFrame) else [None]
    for column in targets:
        y_fit, y_val = (y_train, y_valid) if column is None else (y_train[column], y_valid[column])
        labels = np.unique(np.asarray(y_fit, dtype=object).astype(str))  # sorted: searchsorted codes
        fit, seconds = _target(y_fit, labels), FLAML_BUDGET / len(targets)
        if FLAML_SEARCH:
            fitted = _search(train, fit, valid, _target(y_val, labels), seconds, column or "target")
        else:
            fitted = _lightgbm(train, fit)
        model["automl"].append(fitted)
        model["labels"].append(labels)
    return model


def _search(train, y, valid, y_valid, seconds, name):
    from flaml import AutoML

    automl = AutoML()
    automl.fit(train, y, X_val=valid, y_val=y_valid, task=FLAML_TASK, metric=FLAML_METRIC, time_budget=seconds,
               n_jobs=int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1), seed=FLAML_SEED, verbose=0)
    print(f"FLAML {name}: {automl.best_estimator}, validation loss {automl.best_loss:.6g}")
    return automl


def _lightgbm(table, y):
    """LightGBM with its own defaults, no rows watched for early stopping: what a user fits without a search.
    It learns the rows it is given, the validation rows too when the starter refits (CBR_REFIT)."""
    import lightgbm as lgb

    learner = lgb.LGBMRegressor if FLAML_TASK == "regression" else lgb.LGBMClassifier
    return learner(verbose=-1).fit(table, y)


def predict(model, X):
    table = _table(model, X)
    outputs = []
    for automl, labels in zip(model["automl"], model["labels"], strict=True):
        if FLAML_OUTPUT == "labels":
            outputs.append(labels[np.asarray(automl.predict(table)).astype(int)])
        elif FLAML_OUTPUT == "positive":
            proba = automl.predict_proba(table)
            outputs.append(proba[:, list(automl.classes_).index(1)])
        elif FLAML_OUTPUT == "classes":
            proba = automl.predict_proba(table)
            known = [str(labels[int(c)]) for c in automl.classes_]
            outputs.append(np.column_stack([proba[:, known.index(str(c))] if str(c) in known else np.zeros(len(proba))
                                            for c in FLAML_CLASSES]))
        else:
            values = np.asarray(automl.predict(table), dtype=float)
            outputs.append(np.expm1(values) if FLAML_LOG_TARGET else values)
    return outputs[0] if len(outputs) == 1 else np.column_stack(outputs)
