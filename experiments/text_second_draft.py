"""The general text drafts' second learner, which the search's ensemble blends with the first (a linear
model over word and character n-grams): LightGBM over word n-grams (the draft now) against candidates
that learn differently and fast. Each text task's training file is split per seed into 64% fit, 16%
validation (the early stopping rows a script has) and 20% rows neither sees, which grade them: no test
rows are read. Prints the grade of each learner alone, of its blend with the first draft (probabilities or
predictions averaged, half each), and its seconds.
Usage: python experiments/text_second_draft.py TRAIN_CSV TEXT_COLUMN METRIC TARGET [TARGET ...]"""

import sys
import time
import warnings
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.calibration import CalibratedClassifierCV
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge, SGDClassifier
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import ComplementNB, MultinomialNB
from sklearn.svm import LinearSVC

sys.path.insert(0, str(Path(__file__).resolve().parent))
from text_drafts import CHARS, WORDS  # noqa: E402  (the first draft's features, as text_drafts.py has them)

TREE_WORDS = dict(ngram_range=(1, 2), min_df=2, max_features=20000, sublinear_tf=True)
SEEDS = (0, 1, 2)
REGRESSION = ("rmse", "mcrmse")

warnings.filterwarnings("ignore")


def vectors(settings, fit_t, *others):
    made = [TfidfVectorizer(**s).fit(fit_t) for s in settings]
    return [sparse.hstack([v.transform(t) for v in made], format="csr") for t in (fit_t, *others)]


def outputs(metric, model, X):
    if metric in REGRESSION:
        return np.asarray(model.predict(X), dtype=float).reshape(X.shape[0], -1)
    return model.predict_proba(X)


def grade(metric, classes, y, out) -> float:
    if metric in REGRESSION:
        truth = np.asarray(y, dtype=float).reshape(len(out), -1)
        return float(np.mean(np.sqrt(((out - truth) ** 2).mean(axis=0))))
    if metric == "auroc":
        return float(roc_auc_score(np.asarray(y) == classes[1], out[:, 1]))
    if metric == "accuracy":
        return float(accuracy_score(y, np.asarray(classes)[out.argmax(axis=1)]))
    return float(log_loss(y, np.clip(out, 1e-6, 1), labels=classes))


def lightgbm_words(metric, fit_t, valid_t, eval_t, fit_y, valid_y):
    X_fit, X_valid, X_eval = vectors([TREE_WORDS], fit_t, valid_t, eval_t)
    make = lgb.LGBMRegressor if metric in REGRESSION else lgb.LGBMClassifier
    params = dict(n_estimators=2000, learning_rate=0.05, num_leaves=31, min_child_samples=10, subsample=0.8,
                  subsample_freq=1, colsample_bytree=0.5, random_state=0, verbose=-1, n_jobs=2)
    targets = np.asarray(fit_y).reshape(len(fit_t), -1) if metric in REGRESSION else None
    if targets is None:
        model = make(**params).fit(X_fit, fit_y, eval_set=[(X_valid, valid_y)],
                                   callbacks=[lgb.early_stopping(50, verbose=False)])
        return outputs(metric, model, X_eval)
    valid = np.asarray(valid_y).reshape(len(valid_t), -1)
    columns = [make(**params).fit(X_fit, targets[:, k], eval_set=[(X_valid, valid[:, k])],
                                  callbacks=[lgb.early_stopping(50, verbose=False)]).predict(X_eval)
               for k in range(targets.shape[1])]
    return np.column_stack(columns)


def candidates(metric):
    """name -> (vectorizer settings, learner) of the linear candidates."""
    if metric in REGRESSION:
        return {"ridge-words": ([WORDS], lambda: Ridge(alpha=1.0)),
                "ridge-chars": ([CHARS], lambda: Ridge(alpha=1.0))}
    return {"nb-words": ([dict(WORDS, sublinear_tf=False, use_idf=False, norm=None)], lambda: MultinomialNB(alpha=0.1)),
            "cnb-words a=0.1": ([WORDS], lambda: ComplementNB(alpha=0.1)),
            "cnb-words a=0.3": ([WORDS], lambda: ComplementNB(alpha=0.3)),
            "cnb-words a=1": ([WORDS], lambda: ComplementNB(alpha=1.0)),
            "sgd-words": ([WORDS], lambda: SGDClassifier(loss="modified_huber", alpha=1e-4, random_state=0)),
            "svm-chars": ([CHARS], lambda: CalibratedClassifierCV(LinearSVC(C=0.5), cv=3)),
            "lr-words": ([WORDS], lambda: LogisticRegression(C=4.0, max_iter=3000))}


def three_ways(texts, y, seed: int):
    """fit, validation and graded texts, then their targets: 64%, 16% and 20% of the training file."""
    rest_t, eval_t, rest_y, eval_y = train_test_split(texts, y, test_size=0.2, random_state=seed)
    fit_t, valid_t, fit_y, valid_y = train_test_split(rest_t, rest_y, test_size=0.2, random_state=seed)
    return fit_t, valid_t, eval_t, fit_y, valid_y, eval_y


def one_split(texts, y, metric, seed):
    fit_t, valid_t, eval_t, fit_y, valid_y, eval_y = three_ways(texts, y, seed)
    classes = None if metric in REGRESSION else sorted(set(fit_y))
    started = time.time()
    X_fit, X_eval = vectors([WORDS, CHARS], fit_t, eval_t)
    first = (Ridge(alpha=1.0) if metric in REGRESSION else LogisticRegression(C=4.0, max_iter=3000)).fit(X_fit, fit_y)
    base = outputs(metric, first, X_eval)
    rows = [("first: lr words+chars", seed, grade(metric, classes, eval_y, base), None, time.time() - started)]
    started = time.time()
    out = lightgbm_words(metric, fit_t, valid_t, eval_t, fit_y, valid_y)
    rows.append(("lightgbm-words", seed, grade(metric, classes, eval_y, out),
                 grade(metric, classes, eval_y, (out + base) / 2), time.time() - started))
    for name, (settings, make) in candidates(metric).items():
        started = time.time()
        A_fit, A_eval = vectors(settings, fit_t, eval_t)
        out = outputs(metric, make().fit(A_fit, fit_y), A_eval)
        rows.append((name, seed, grade(metric, classes, eval_y, out), grade(metric, classes, eval_y, (out + base) / 2),
                     time.time() - started))
    return rows


def main() -> None:
    path, column, metric, *targets = sys.argv[1:]
    data = pd.read_csv(path)
    texts = data[column].fillna("").astype(str)
    y = data[targets].to_numpy(dtype=float) if metric in REGRESSION else data[targets[0]].astype(str)
    rows = [row for seed in SEEDS for row in one_split(texts, y, metric, seed)]
    frame = pd.DataFrame(rows, columns=["learner", "seed", "alone", "blended", "seconds"])
    print(path, metric, "(auroc, accuracy: higher is better; logloss, mcrmse: lower)")
    print(frame.groupby("learner", sort=False)[["alone", "blended", "seconds"]].mean().round(4))


if __name__ == "__main__":
    main()
