import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import train_test_split

# eval_set works on every LightGBM 4.x; 4.7 added eval_X/eval_y and warns on eval_set, which is noise here.
warnings.filterwarnings("ignore", message=".*'eval_set' is deprecated")

TARGET = "compressive_strength"
ID = "id"

# Gradient-boosted trees (LightGBM) on the raw mixture amounts plus a few ratios that concrete
# engineering treats as decisive; the validation rows stop the boosting early. Text columns, which this
# task has none of, would become pandas categoricals that LightGBM splits on natively.
PARAMS = dict(
    n_estimators=3000,
    learning_rate=0.05,
    num_leaves=15,
    min_child_samples=5,
    subsample=0.8,
    subsample_freq=1,
    colsample_bytree=0.8,
    reg_lambda=1.0,
    n_jobs=2,
    random_state=0,
    verbose=-1,
)


def learn_categories(X):
    return {c: sorted(X[c].dropna().astype(str).unique()) for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])}


def add_ratios(X, categories):
    """Water/cement and binder ratios: strength follows them more closely than the raw amounts."""
    X = X.copy()
    for column, levels in categories.items():
        values = X[column].astype("string")
        X[column] = pd.Categorical(values.where(values.isin(levels)), categories=levels)
    numeric = X.select_dtypes("number")
    if {"water", "cement"} <= set(numeric.columns):
        binder = X["cement"] + X.get("blast_furnace_slag", 0) + X.get("fly_ash", 0)
        X["water_cement"] = X["water"] / X["cement"].clip(lower=1e-6)
        X["water_binder"] = X["water"] / binder.clip(lower=1e-6)
    if "age" in numeric.columns:
        X["log_age"] = np.log1p(X["age"])
    return X


def train_model(X_train, y_train, X_valid, y_valid):
    categories = learn_categories(X_train)
    booster = lgb.LGBMRegressor(**PARAMS)
    booster.fit(
        add_ratios(X_train, categories),
        y_train,
        eval_set=[(add_ratios(X_valid, categories), y_valid)],
        callbacks=[lgb.early_stopping(100, verbose=False)],
    )
    return {"booster": booster, "categories": categories}


def predict(model, X):
    booster = model["booster"]
    return booster.predict(add_ratios(X, model["categories"]), num_iteration=booster.best_iteration_)


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data.drop(columns=[ID, TARGET]), data[TARGET]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)

    model = train_model(X_train, y_train, X_valid, y_valid)
    rmse = mean_squared_error(y_valid, predict(model, X_valid)) ** 0.5
    print(f"Validation rmse: {rmse:.6f}")

    test = pd.read_csv("test.csv")
    submission = pd.DataFrame({ID: test[ID], TARGET: predict(model, test.drop(columns=[ID]))})
    submission.to_csv("submission.csv", index=False)
