"""The general table draft's settings on two regression tasks graded by an absolute error: LightGBM's
absolute loss at a learning rate of 0.1 with a patience of 50 rounds (the draft before) against the
squared loss stopping early on the absolute error, and XGBoost's; each on two seeded 80/20 splits of the
task's training file (its validation rows, not the test rows). Prints the error and seconds per setting.
Usage: python experiments/draft_settings.py TASK TARGET METRIC   (e.g. hotel-rates avg_price_per_room mae)"""

import sys
import time
import warnings
from pathlib import Path

import lightgbm as lgb
import pandas as pd
import xgboost as xgb
from sklearn.metrics import mean_absolute_error, median_absolute_error
from sklearn.model_selection import train_test_split

from dsagent_cbr.untrusted import general_tabular as g

ROOT = Path(__file__).resolve().parents[1]

warnings.filterwarnings("ignore")


def fitted(model, split, score, **fit) -> tuple[float, float]:
    """The model's validation error and its seconds to fit."""
    X_train, y_train, X_valid, y_valid = split
    started = time.time()
    model.fit(X_train, y_train, eval_set=[(X_valid, y_valid)], **fit)
    return round(score(y_valid, model.predict(X_valid)), 4), round(time.time() - started, 1)


def main() -> None:
    task, target, metric = sys.argv[1:4]
    score = {"mae": mean_absolute_error, "medae": median_absolute_error}[metric]
    data = pd.read_csv(ROOT / "tasks" / task / "data" / "train.csv")
    X, y = data.drop(columns=["id", target]), data[target]
    rows = []
    for seed in (42, 7):
        Xt, Xv, yt, yv = train_test_split(X, y, test_size=0.2, random_state=seed)
        spec = g.learn(Xt)
        split = (g.design(Xt, spec), yt, g.design(Xv, spec), yv)

        def run(name, model, split=split, seed=seed, **fit):
            rows.append((name, seed, *fitted(model, split, score, **fit)))

        base = dict(num_leaves=31, min_child_samples=20, subsample=0.8, subsample_freq=1, colsample_bytree=0.8,
                    reg_lambda=1.0, random_state=0, verbose=-1, n_jobs=2)
        for name, settings, patience in [("now l1 .1 p50", dict(n_estimators=2000, learning_rate=0.1, objective="l1"), 50),
                                         ("l1 .05 p200", dict(n_estimators=5000, learning_rate=0.05, objective="l1"), 200),
                                         ("l2/l1 .05 p200", dict(n_estimators=5000, learning_rate=0.05, metric="l1"), 200),
                                         ("l2/l1 .1 p200", dict(n_estimators=5000, learning_rate=0.1, metric="l1"), 200),
                                         ("l2/l1 .05 p100", dict(n_estimators=5000, learning_rate=0.05, metric="l1"), 100)]:
            run(name, lgb.LGBMRegressor(**settings, **base), callbacks=[lgb.early_stopping(patience, verbose=False)])
        xb = dict(n_estimators=5000, min_child_weight=1.0, subsample=0.8, colsample_bytree=0.8, reg_lambda=1.0,
                  tree_method="hist", enable_categorical=True, max_cat_to_onehot=1, random_state=0, n_jobs=2)
        run("xgb now .1 p50", xgb.XGBRegressor(learning_rate=0.1, max_depth=6, early_stopping_rounds=50, **xb), verbose=False)
        run("xgb mae .05 p200", xgb.XGBRegressor(learning_rate=0.05, max_depth=6, early_stopping_rounds=200,
                                                 eval_metric="mae", **xb), verbose=False)
        run("xgb mae .1 p100", xgb.XGBRegressor(learning_rate=0.1, max_depth=6, early_stopping_rounds=100,
                                                eval_metric="mae", **xb), verbose=False)
    frame = pd.DataFrame(rows, columns=["setting", "seed", "score", "seconds"])
    print(task)
    print(frame.pivot_table(index="setting", columns="seed", values=["score", "seconds"]).round(3))


if __name__ == "__main__":
    main()
