"""Runs untrusted, inside the sandbox, adapted into a task's starter as the search's first draft.
cbr's general solution for a table: gradient boosting over every column, each in the form it holds
information in: numbers as they are, dates as their parts, categoricals as categories (as integer
codes past CODES_ABOVE levels), free text as TF-IDF features beside the table. The search drafts it first so that it never ends below a default
gradient-boosting model; the adapter fits it to the task like any case. `cbr` writes the classifier
for a classification task, early stopping on the absolute error when that is the metric, XGBoost in place of
LightGBM for another draft, and for a table with free text a linear model (search/drafts.py)."""

import os

import lightgbm as lgb
import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer

THREADS = int(os.environ.get("OMP_NUM_THREADS") or 0) or None
CBR_RAW_COLUMNS = True  # the adapter hands this code every column as it is: it encodes them itself
# a category of more levels is handed to the trees as its integer codes, not as a category: their own
# categorical splits over thousands of levels fit noise (a flight table's 4,003 tail numbers: validation
# AUROC 0.738 as categories, 0.792 as codes), while over a hundred or so they help (a hotel table's
# agents and companies, 94-154 levels: MAE 7.72 as categories, 7.80 as codes); docs/decisions/category-codes.md
CODES_ABOVE = 200


def column_kinds(X):
    """number, date, text or category for each column, from the training rows."""
    kinds = {}
    for column in X.columns:
        values = X[column]
        if pd.api.types.is_bool_dtype(values) or pd.api.types.is_numeric_dtype(values):
            kinds[column] = "number"
            continue
        sample = values.dropna().astype(str).head(500)
        dated = pd.to_datetime(sample, errors="coerce", format="mixed")
        if len(sample) and sample.str.contains(r"\d").all() and dated.notna().mean() > 0.9:
            kinds[column] = "date"
        elif len(sample) and sample.str.len().mean() >= 30 and values.nunique() > 0.3 * len(values):
            kinds[column] = "text"
        else:
            kinds[column] = "category"
    return kinds


def as_numbers(X, column, kind):
    """A number column as floats; a date column as its parts and its count of days."""
    if kind == "date":
        when = pd.to_datetime(X[column], errors="coerce", format="mixed")
        parts = {f"{column}_{part}": getattr(when.dt, part).astype(float)
                 for part in ("year", "month", "day", "dayofweek", "hour")}
        parts[f"{column}_ordinal"] = (when - pd.Timestamp("1970-01-01")).dt.days.astype(float)
        return parts
    return {column: pd.to_numeric(X[column], errors="coerce").astype(float)}


def learn(X):
    kinds = column_kinds(X)
    categories = {c: sorted(X[c].dropna().astype(str).unique()) for c, k in kinds.items() if k == "category"}
    texts = {c: TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=20000, sublinear_tf=True).fit(
        X[c].fillna("").astype(str)) for c, k in kinds.items() if k == "text"}
    return {"kinds": kinds, "categories": categories, "texts": texts}


def design(X, spec):
    """The table the model learns from: a frame, or a sparse matrix when there is free text."""
    table = pd.DataFrame(index=X.index)
    for column, kind in spec["kinds"].items():
        if kind in ("number", "date"):
            for name, values in as_numbers(X, column, kind).items():
                table[name] = values
        elif kind == "category":
            known = spec["categories"][column]  # a category unseen in training is missing
            values = X[column].astype(str).where(X[column].notna())
            levels = pd.Categorical(values.where(values.isin(known)), categories=known)
            many = len(known) > CODES_ABOVE
            codes = pd.Series(levels.codes, index=X.index, dtype=float).replace(-1.0, np.nan)
            table[column] = codes if many else levels
    if not spec["texts"]:
        return table
    codes = table.apply(lambda c: c.cat.codes.replace(-1, np.nan) if isinstance(c.dtype, pd.CategoricalDtype) else c)
    parts = [sparse.csr_matrix(codes.to_numpy(dtype=float))]
    parts += [vectorizer.transform(X[c].fillna("").astype(str)) for c, vectorizer in spec["texts"].items()]
    return sparse.hstack(parts, format="csr")


def train_model(X_train, y_train, X_valid, y_valid):
    spec = learn(X_train)
    # early stopping decides the rounds; a patience of 200 lets a slow learner (many small gains) go on
    model = lgb.LGBMRegressor(n_estimators=5000, learning_rate=0.05, num_leaves=31, min_child_samples=20,
                              subsample=0.8, subsample_freq=1, colsample_bytree=0.8, reg_lambda=1.0, random_state=0,
                              verbose=-1, n_jobs=THREADS, metric=None)
    model.fit(design(X_train, spec), y_train, eval_set=[(design(X_valid, spec), y_valid)],
              callbacks=[lgb.early_stopping(200, verbose=False)])
    return {"model": model, "spec": spec}


def predict(model, X):
    return model["model"].predict(design(X, model["spec"]))
