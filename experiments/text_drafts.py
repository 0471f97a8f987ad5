"""The general text draft's features and regularisation on the deployment text tasks: a linear model over
word and character n-grams (the draft now) against one over word n-grams only (FLAML's front end in the
bench), at two strengths; each on two seeded 80/20 splits of the task's training file (its validation rows,
not the test rows). Prints the validation score and seconds per setting (higher is better for auroc;
lower for logloss and rmse).
Usage: python experiments/text_drafts.py TASK TARGET METRIC   (e.g. fine-foods-rating score auroc)"""

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import log_loss, mean_squared_error, roc_auc_score
from sklearn.model_selection import train_test_split

ROOT = Path(__file__).resolve().parents[1]
WORDS = dict(ngram_range=(1, 2), min_df=2, max_features=100000, sublinear_tf=True)
CHARS = dict(analyzer="char_wb", ngram_range=(2, 5), min_df=3, max_features=100000, sublinear_tf=True)

warnings.filterwarnings("ignore")


def features(settings: list[dict], train: pd.Series, valid: pd.Series):
    vectorizers = [TfidfVectorizer(**s).fit(train) for s in settings]
    return (sparse.hstack([v.transform(train) for v in vectorizers], format="csr"),
            sparse.hstack([v.transform(valid) for v in vectorizers], format="csr"))


def graded(metric: str, y_valid, model, X_valid) -> float:
    if metric == "rmse":
        return float(np.sqrt(mean_squared_error(y_valid, model.predict(X_valid))))
    probabilities = model.predict_proba(X_valid)
    if metric == "auroc":
        return float(roc_auc_score(y_valid == model.classes_[1], probabilities[:, 1]))
    return float(log_loss(y_valid, probabilities, labels=model.classes_))


def main() -> None:
    task, target, metric = sys.argv[1:4]
    data = pd.read_csv(ROOT / "tasks" / task / "data" / "train.csv")
    texts, y = data["text"].fillna("").astype(str), data[target]
    rows = []
    for seed in (42, 7):
        t_train, t_valid, y_train, y_valid = train_test_split(texts, y, test_size=0.2, random_state=seed)
        for name, settings in [("words+chars", [WORDS, CHARS]), ("words", [WORDS])]:
            started = time.time()
            X_train, X_valid = features(settings, t_train, t_valid)
            vectorised = time.time() - started
            for strength in (1.0, 4.0):
                started = time.time()
                model = Ridge(alpha=1.0 / strength) if metric == "rmse" else \
                    LogisticRegression(C=strength, max_iter=3000)
                model.fit(X_train, y_train)
                score = graded(metric, y_valid, model, X_valid)
                rows.append((f"{name} C={strength:g}", seed, round(score, 4), round(vectorised + time.time() - started, 1)))
    frame = pd.DataFrame(rows, columns=["setting", "seed", "score", "seconds"])
    print(task, metric)
    print(frame.pivot_table(index="setting", columns="seed", values=["score", "seconds"]).round(4))


if __name__ == "__main__":
    main()
