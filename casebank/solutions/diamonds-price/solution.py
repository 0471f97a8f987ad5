import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
from sklearn.metrics import mean_squared_log_error
from sklearn.model_selection import train_test_split

# eval_set works on every LightGBM 4.x; 4.7 added eval_X/eval_y and warns on eval_set, which is noise here.
warnings.filterwarnings("ignore", message=".*'eval_set' is deprecated")

TARGET = "price"
ID = "id"

# LightGBM on log1p(price): RMSLE is RMSE on that scale, so the booster's squared loss then optimises
# the metric directly. Text columns become pandas categoricals with the categories fixed at training,
# which LightGBM splits on natively.
PARAMS = dict(
    n_estimators=3000,
    learning_rate=0.1,
    num_leaves=31,
    min_child_samples=20,
    subsample=0.8,
    subsample_freq=1,
    colsample_bytree=0.8,
    reg_lambda=1.0,
    n_jobs=2,
    random_state=0,
    verbose=-1,
)


def encode(X, categories):
    """Give every non-numeric column the categories seen in training (unseen values become NaN)."""
    X = X.copy()
    for column, levels in categories.items():
        values = X[column].astype("string")
        X[column] = pd.Categorical(values.where(values.isin(levels)), categories=levels)
    return X


def learn_categories(X):
    return {c: sorted(X[c].dropna().astype(str).unique()) for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])}


def train_model(X_train, y_train, X_valid, y_valid):
    categories = learn_categories(X_train)
    booster = lgb.LGBMRegressor(**PARAMS)
    booster.fit(
        encode(X_train, categories),
        np.log1p(y_train),
        eval_set=[(encode(X_valid, categories), np.log1p(y_valid))],
        callbacks=[lgb.early_stopping(100, verbose=False)],
    )
    return {"booster": booster, "categories": categories}


def predict(model, X):
    booster = model["booster"]
    log_price = booster.predict(encode(X, model["categories"]), num_iteration=booster.best_iteration_)
    return np.clip(np.expm1(log_price), 0.0, None)


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data.drop(columns=[ID, TARGET]), data[TARGET]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)

    model = train_model(X_train, y_train, X_valid, y_valid)
    rmsle = mean_squared_log_error(y_valid, predict(model, X_valid)) ** 0.5
    print(f"Validation rmsle: {rmsle:.6f}")

    test = pd.read_csv("test.csv")
    submission = pd.DataFrame({ID: test[ID], TARGET: predict(model, test.drop(columns=[ID]))})
    submission.to_csv("submission.csv", index=False)
