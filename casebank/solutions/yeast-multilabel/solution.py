import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

# eval_set works on every LightGBM 4.x; 4.7 added eval_X/eval_y and warns on eval_set, which is noise here.
warnings.filterwarnings("ignore", message=".*'eval_set' is deprecated")

TARGETS = [f"Class{i}" for i in range(1, 15)]
ID = "id"

# One-vs-rest: one LightGBM binary classifier per label, each stopped early on its own validation AUROC.
# The 103 features are dense and numeric and the labels noisy, so very small trees (four leaves) and
# column subsampling do the regularising. A label with a single class in training gets its training
# prevalence as a constant; one with a single class in validation gets a fixed number of rounds.
PARAMS = dict(
    n_estimators=1000,
    learning_rate=0.1,
    num_leaves=4,
    min_child_samples=30,
    subsample=0.8,
    subsample_freq=1,
    colsample_bytree=0.4,
    reg_lambda=1.0,
    n_jobs=2,
    random_state=0,
    verbose=-1,
)


def fit_label(X_train, y_train, X_valid, y_valid):
    """A booster for one label, or the positive rate when the label cannot be learnt or validated."""
    if y_train.nunique() < 2:
        return float(y_train.mean())
    booster = lgb.LGBMClassifier(**PARAMS)
    if y_valid.nunique() < 2:
        booster.set_params(n_estimators=200)
        booster.fit(X_train, y_train)
        return booster
    booster.fit(
        X_train,
        y_train,
        eval_set=[(X_valid, y_valid)],
        eval_metric="auc",
        callbacks=[lgb.early_stopping(100, verbose=False)],
    )
    return booster


def train_model(X_train, y_train, X_valid, y_valid):
    return {
        label: fit_label(X_train, y_train[label].astype(int), X_valid, y_valid[label].astype(int))
        for label in y_train.columns
    }


def predict(model, X):
    columns = []
    for booster in model.values():
        if isinstance(booster, float):
            columns.append(np.full(len(X), booster))
        else:
            columns.append(booster.predict_proba(X, num_iteration=booster.best_iteration_)[:, 1])
    return np.column_stack(columns)


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data.drop(columns=[ID, *TARGETS]), data[TARGETS]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)

    model = train_model(X_train, y_train, X_valid, y_valid)
    auroc = roc_auc_score(y_valid, predict(model, X_valid), average="macro")
    print(f"Validation auroc: {auroc:.6f}")

    test = pd.read_csv("test.csv")
    submission = pd.DataFrame(predict(model, test.drop(columns=[ID])), columns=TARGETS)
    submission.insert(0, ID, test[ID].to_numpy())
    submission.to_csv("submission.csv", index=False)
