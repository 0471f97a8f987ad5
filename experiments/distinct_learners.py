"""Which learner, beside the table drafts' LightGBM and XGBoost, makes their blend better: the linear
draft's model (one-hot categories, scaled numbers, Ridge or logistic regression) or a forest of extremely
randomised trees (ExtraTrees over the boosters' table, categories as integer codes), on tables of every
kind of target.

Per task and seed, the task's training file is split 80/20: the 20% plays the search's selection rows
(never the task's test rows). Each learner fits on the 80% as the drafts do (LightGBM and XGBoost stop
early on a fifth of it) and predicts the 20%. The blends are made as the search makes them
(search/ensemble.py): the selection rows are halved, the weights one half chooses (a grid over the
simplex, step 0.1) predict the other half, and the score is on both halves so predicted. Prints each
learner's score and seconds, each blend's score, and per blend its gain over LightGBM + XGBoost
(positive: better), task by task and on average.

Usage: python experiments/distinct_learners.py TASK_DIR [TASK_DIR ...] [--seeds 42,7] [--out FILE.json]"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import warnings
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import xgboost as xgb
from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import (
    accuracy_score,
    log_loss,
    mean_absolute_error,
    median_absolute_error,
    roc_auc_score,
)
from sklearn.model_selection import train_test_split

from dsagent_cbr.search.drafts import _LINEAR_FUNCTIONS
from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.table_facts import _train_file
from dsagent_cbr.untrusted import general_tabular as g

warnings.filterwarnings("ignore")
BASE = ("lightgbm", "xgboost")
BLENDS = [BASE, (*BASE, "linear"), (*BASE, "forest"), (*BASE, "linear", "forest")]
MAXIMIZE = {"auroc", "accuracy"}


def linear_functions() -> dict:
    """The linear draft's learn and design (search/drafts.py), over the table draft's helpers."""
    scope = dict(vars(g))
    exec(compile(_LINEAR_FUNCTIONS, "linear draft", "exec"), scope)
    return scope


def score(metric: str, y, proba_or_value, classes) -> float:
    p = proba_or_value
    if metric == "auroc":
        return roc_auc_score(y, p[:, 1])
    if metric == "logloss":
        return log_loss(y, np.clip(p, 1e-15, 1), labels=classes)
    if metric == "accuracy":
        return accuracy_score(y, np.asarray(classes)[p.argmax(axis=1)])
    if metric == "rmse":
        return float(np.sqrt(np.mean((y - p) ** 2)))
    if metric == "rmsle":
        return float(np.sqrt(np.mean((np.log1p(y) - np.log1p(np.clip(p, 0, None))) ** 2)))
    return {"mae": mean_absolute_error, "medae": median_absolute_error}[metric](y, p)


def fit_all(X, y, X_sel, classifier: bool) -> dict[str, tuple[np.ndarray, float]]:
    """Each learner's predictions of the selection rows (probabilities for a classifier) and seconds."""
    Xt, Xv, yt, yv = train_test_split(X, y, test_size=0.2, random_state=0)
    spec = g.learn(Xt)
    out = {}
    common = dict(subsample=0.8, colsample_bytree=0.8, reg_lambda=1.0, random_state=0, n_jobs=2)
    boosters = {
        "lightgbm": (lgb.LGBMClassifier if classifier else lgb.LGBMRegressor)(
            n_estimators=5000, learning_rate=0.05, num_leaves=31, min_child_samples=20, subsample_freq=1,
            verbose=-1, **common),
        "xgboost": (xgb.XGBClassifier if classifier else xgb.XGBRegressor)(
            n_estimators=5000, learning_rate=0.05, grow_policy="lossguide", max_leaves=31, max_depth=0,
            tree_method="hist", enable_categorical=True, max_cat_to_onehot=1, early_stopping_rounds=200, **common),
    }
    for name, model in boosters.items():
        started = time.time()
        fit = {"callbacks": [lgb.early_stopping(200, verbose=False)]} if name == "lightgbm" else {"verbose": False}
        yt_fit, yv_fit = (coded(yt, y), coded(yv, y)) if classifier and name == "xgboost" else (yt, yv)
        model.fit(g.design(Xt, spec), yt_fit, eval_set=[(g.design(Xv, spec), yv_fit)], **fit)
        out[name] = (predict(model, g.design(X_sel, spec), classifier), time.time() - started)
    out["forest"] = forest(X, y, X_sel, classifier)
    out["linear"] = linear(X, y, X_sel, classifier)
    return out


def coded(values: pd.Series, every: pd.Series) -> np.ndarray:
    return pd.Categorical(values, categories=sorted(every.unique())).codes


def predict(model, table, classifier: bool) -> np.ndarray:
    return model.predict_proba(table) if classifier else model.predict(table)


def forest(X, y, X_sel, classifier: bool) -> tuple[np.ndarray, float]:
    """ExtraTrees over the boosters' table with every category as integer codes (it takes no categories)."""
    started = time.time()
    spec = g.learn(X)
    kind = ExtraTreesClassifier if classifier else ExtraTreesRegressor
    model = kind(n_estimators=300, min_samples_leaf=2, max_features=0.7, n_jobs=2, random_state=0)
    model.fit(forest_table(X, spec), y)
    return predict(model, forest_table(X_sel, spec), classifier), time.time() - started


def forest_table(X, spec):
    """The boosters' table, categories as integer codes and missing values as -999 (a table with free
    text is already a sparse matrix of codes and TF-IDF)."""
    table = g.design(X, spec)
    if not isinstance(table, pd.DataFrame):
        return table
    codes = table.apply(
        lambda c: c.cat.codes.replace(-1, np.nan) if isinstance(c.dtype, pd.CategoricalDtype) else c)
    return codes.fillna(-999.0)


def linear(X, y, X_sel, classifier: bool) -> tuple[np.ndarray, float]:
    started = time.time()
    functions = linear_functions()
    spec = functions["learn"](X)
    model = LogisticRegression(C=4.0, max_iter=3000) if classifier else Ridge(alpha=1.0)
    model.fit(functions["design"](X, spec), y)
    return predict(model, functions["design"](X_sel, spec), classifier), time.time() - started


def crossfit(members: list[np.ndarray], y, metric: str, classes, seed: int) -> float:
    """The blend's score on the selection rows, each half predicted with the weights the other chose."""
    rows = np.random.default_rng(seed).permutation(len(y))
    halves = [rows[: len(rows) // 2], rows[len(rows) // 2 :]]
    sign = -1 if metric in MAXIMIZE else 1
    grid = [w for w in itertools.product(np.arange(0, 1.01, 0.1), repeat=len(members)) if abs(sum(w) - 1) < 1e-9]
    blended = np.zeros_like(members[0], dtype=float)
    for choose, judge in (halves, halves[::-1]):
        best = min(grid, key=lambda w: sign * score(metric, y[choose], mix(members, w, choose), classes))
        blended[judge] = mix(members, best, judge)
    return score(metric, y, blended, classes)


def mix(members, weights, rows) -> np.ndarray:
    return sum(w * m[rows] for w, m in zip(weights, members, strict=True))


def one_task(folder: str, seeds: list[int]) -> list[dict]:
    task = load_task(folder)
    data = pd.read_csv(_train_file(task))
    (target,) = task.target  # one target column: the drafts fit one model per column otherwise
    X = data.drop(columns=[c for c in (task.id_column, target) if c in data])
    y = data[target]
    classifier = task.task_type != "regression"
    classes = sorted(y.unique()) if classifier else None
    rows = []
    for seed in seeds:
        X_fit, X_sel, y_fit, y_sel = train_test_split(X, y, test_size=0.2, random_state=seed)
        y_sel = y_sel.to_numpy()
        learned = fit_all(X_fit, y_fit, X_sel, classifier)
        row = {"task": task.name, "metric": task.metric_name, "seed": seed, "rows": len(data)}
        for name, (pred, seconds) in learned.items():
            row[name] = round(score(task.metric_name, y_sel, pred, classes), 5)
            row[f"{name}_s"] = round(seconds, 1)
        for blend in BLENDS:
            members = [learned[name][0] for name in blend]
            row["+".join(blend)] = round(crossfit(members, y_sel, task.metric_name, classes, seed), 5)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def gains(rows: list[dict]) -> None:
    """Per blend, its gain over LightGBM + XGBoost (positive: better), per task (mean over seeds), and
    on how many tasks it gained."""
    frame = pd.DataFrame(rows)
    base = "+".join(BASE)
    for blend in BLENDS[1:]:
        name = "+".join(blend)
        sign = frame["metric"].map(lambda m: 1 if m in MAXIMIZE else -1)
        gain = (sign * (frame[name] - frame[base])).groupby(frame["task"]).mean()
        print(f"{name}: gains on {int((gain > 0).sum())} of {len(gain)} tasks; "
              + ", ".join(f"{t} {v:+.4f}" for t, v in gain.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="+")
    parser.add_argument("--seeds", default="42,7")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = [row for folder in args.tasks for row in one_task(folder, seeds)]
    gains(rows)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
