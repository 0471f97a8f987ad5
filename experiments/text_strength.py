"""The general text draft's regularisation: the fixed strength it has (C=4 for a logistic regression,
alpha=1 for ridge) against a strength the script chooses itself on its validation rows, from a path of
strengths, by the validation log loss (classification) or squared error (regression). Each text task's
training file is split three ways per seed (64% fit, 16% the script's validation rows, 20% rows it never
sees, which grade it): no test rows are read. Prints, per task and setting, the grade on the unseen rows,
the strengths chosen and the seconds.
Usage: python experiments/text_strength.py TRAIN_CSV TEXT_COLUMN METRIC TARGET [TARGET ...]
       (e.g. tasks/fine-foods-rating/data/train.csv text auroc score)"""

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, log_loss, mean_squared_error, roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from text_drafts import CHARS, WORDS  # noqa: E402  (the first draft's features, as text_drafts.py has them)
from text_second_draft import three_ways  # noqa: E402

PATH = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
FIXED = 4.0  # the draft's C; its ridge has alpha=1, that is strength 1
SEEDS = (0, 1, 2)

warnings.filterwarnings("ignore")


def learner(metric: str, strength: float):
    return Ridge(alpha=1.0 / strength) if metric in ("rmse", "mcrmse") else LogisticRegression(C=strength, max_iter=3000)


def loss(metric: str, model, X, y) -> float:
    """What the script can choose by on its validation rows without knowing the task's metric."""
    if metric in ("rmse", "mcrmse"):
        return float(mean_squared_error(y, model.predict(X)))
    return float(log_loss(y, model.predict_proba(X), labels=model.classes_))


def grade(metric: str, model, X, y) -> float:
    if metric in ("rmse", "mcrmse"):
        errors = (np.asarray(model.predict(X)).reshape(len(y), -1) - np.asarray(y).reshape(len(y), -1)) ** 2
        return float(np.mean(np.sqrt(errors.mean(axis=0))))
    if metric == "auroc":
        return float(roc_auc_score(y == model.classes_[1], model.predict_proba(X)[:, 1]))
    if metric == "accuracy":
        return float(accuracy_score(y, model.predict(X)))
    return float(log_loss(y, model.predict_proba(X), labels=model.classes_))


def one_split(texts: pd.Series, y, metric: str, seed: int) -> list[tuple]:
    fit_t, valid_t, eval_t, fit_y, valid_y, eval_y = three_ways(texts, y, seed)
    started = time.time()
    vectorizers = [TfidfVectorizer(**s).fit(fit_t) for s in (WORDS, CHARS)]
    X_fit, X_valid, X_eval = (sparse.hstack([v.transform(t) for v in vectorizers], format="csr")
                              for t in (fit_t, valid_t, eval_t))
    vectorised = time.time() - started
    fixed_strength = 1.0 if metric in ("rmse", "mcrmse") else FIXED
    started = time.time()
    fixed = learner(metric, fixed_strength).fit(X_fit, fit_y)
    rows = [("fixed", seed, grade(metric, fixed, X_eval, eval_y), fixed_strength, vectorised + time.time() - started)]
    started = time.time()
    fitted = [(loss(metric, m, X_valid, valid_y), s, m) for s in PATH
              if (m := learner(metric, s).fit(X_fit, fit_y))]
    _, chosen, model = min(fitted, key=lambda f: f[0])
    rows.append(("path", seed, grade(metric, model, X_eval, eval_y), chosen, vectorised + time.time() - started))
    return rows


def main() -> None:
    path, column, metric, *targets = sys.argv[1:]
    data = pd.read_csv(path)
    texts = data[column].fillna("").astype(str)
    y = data[targets[0]].astype(str) if metric not in ("rmse", "mcrmse") else data[targets].to_numpy(dtype=float)
    rows = [row for seed in SEEDS for row in one_split(texts, y, metric, seed)]
    frame = pd.DataFrame(rows, columns=["setting", "seed", "grade", "strength", "seconds"])
    print(path, metric, "(auroc, accuracy: higher is better; logloss, mcrmse: lower)")
    print(frame.pivot_table(index="setting", columns="seed", values=["grade", "strength", "seconds"]).round(4))
    print(frame.groupby("setting")[["grade", "seconds"]].mean().round(4))


if __name__ == "__main__":
    main()
