"""The general table draft's categoricals: LightGBM's own categorical splits for every category column
(the draft before CODES_ABOVE) against integer codes for a column of more than `above` levels (64, and the
draft's CODES_ABOVE), on seeded 80/20
splits of a task's training file (its validation rows, never the test rows). Prints the score, seconds and
rounds per setting and seed, and the mean difference.
Usage: python experiments/category_codes.py TRAIN.csv TARGET METRIC [POSITIVE]
       (METRIC: auroc, mae or rmse; e.g. tasks/hotel-rates/data/train.csv avg_price_per_room mae)"""

import sys
import time
import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
from sklearn.metrics import mean_absolute_error, mean_squared_error, roc_auc_score
from sklearn.model_selection import train_test_split

from dsagent_cbr.untrusted import general_tabular as g

DRAFT_RULE = g.CODES_ABOVE
warnings.filterwarnings("ignore")


def coded(table: pd.DataFrame, above: int) -> pd.DataFrame:
    """The table with each category column of more than `above` levels as its integer codes."""
    def one(column: pd.Series) -> pd.Series:
        many = isinstance(column.dtype, pd.CategoricalDtype) and len(column.cat.categories) > above
        return column.cat.codes.replace(-1, np.nan) if many else column

    return table.apply(one)


def fitted(split, metric: str) -> tuple[float, float, int]:
    """The draft's LightGBM on `split`: its validation score, seconds and rounds."""
    Xt, yt, Xv, yv = split
    kind = lgb.LGBMClassifier if metric == "auroc" else lgb.LGBMRegressor
    model = kind(n_estimators=5000, learning_rate=0.05, num_leaves=31, min_child_samples=20, subsample=0.8,
                 subsample_freq=1, colsample_bytree=0.8, reg_lambda=1.0, random_state=0, verbose=-1, n_jobs=2,
                 metric="l1" if metric == "mae" else None)
    started = time.time()
    model.fit(Xt, yt, eval_set=[(Xv, yv)], callbacks=[lgb.early_stopping(200, verbose=False)])
    seconds = time.time() - started
    if metric == "auroc":
        score = roc_auc_score(yv, model.predict_proba(Xv)[:, 1])
    elif metric == "mae":
        score = mean_absolute_error(yv, model.predict(Xv))
    else:
        score = mean_squared_error(yv, model.predict(Xv)) ** 0.5
    return round(score, 4), round(seconds, 1), model.best_iteration_


def main() -> None:
    path, target, metric = sys.argv[1:4]
    data = pd.read_csv(path)
    X = data.drop(columns=[c for c in ("id", target) if c in data])
    y = (data[target].astype(str) == sys.argv[4]).astype(int) if metric == "auroc" else data[target]
    gaps: dict[int, list[float]] = {}
    for seed in (42, 7):
        Xt, Xv, yt, yv = train_test_split(X, y, test_size=0.2, random_state=seed)
        spec = g.learn(Xt)
        g.CODES_ABOVE = 10**9  # every category a category, as the draft did before CODES_ABOVE
        Dt, Dv = g.design(Xt, spec), g.design(Xv, spec)
        g.CODES_ABOVE = DRAFT_RULE
        native = fitted((Dt, yt, Dv, yv), metric)
        line = f"seed {seed}: categories {native}"
        for above in (64, DRAFT_RULE):
            codes = fitted((coded(Dt, above), yt, coded(Dv, above), yv), metric)
            line += f"  codes>{above} {codes}"
            gaps.setdefault(above, []).append(codes[0] - native[0])
        print(line, flush=True)
    better = "higher" if metric == "auroc" else "lower"
    for above, gap in gaps.items():
        print(f"{path} {metric}: codes>{above} minus categories, mean {np.mean(gap):+.4f} ({better} is better)")


if __name__ == "__main__":
    main()
