import lightgbm as lgb
import pandas as pd
from sklearn.metrics import mean_absolute_error
from sklearn.model_selection import train_test_split

TARGET = "avg_price_per_room"
ID = "id"


CATEGORICAL = ["meal", "country", "market_segment", "distribution_channel", "reserved_room_type",
               "assigned_room_type", "agent", "company", "customer_type"]


def features(X, categories):
    # the arrival date becomes season and weekday; the room, market and agent columns stay
    # categorical (with the training categories, so unseen ones are missing rather than shifted)
    X = X.copy()
    date = pd.to_datetime(X.pop("arrival_date"))
    X["month"], X["weekday"], X["day_of_year"] = date.dt.month, date.dt.dayofweek, date.dt.dayofyear
    X["nights"] = X["stays_in_weekend_nights"] + X["stays_in_week_nights"]
    X["guests"] = X["adults"] + X["children"] + X["babies"]
    for column in CATEGORICAL:
        X[column] = pd.Categorical(X[column].astype(object), categories=categories[column])
    return X


def train_model(X_train, y_train, X_valid, y_valid):
    # boosting on absolute error (the metric is MAE), stopped early on the validation split
    categories = {c: sorted(X_train[c].dropna().astype(str).unique()) for c in CATEGORICAL}
    train, valid = features(X_train, categories), features(X_valid, categories)
    model = lgb.LGBMRegressor(objective="l1", n_estimators=2000, learning_rate=0.1, num_leaves=63,
                              min_child_samples=10, subsample=0.8, subsample_freq=1, colsample_bytree=0.8,
                              cat_smooth=10, random_state=0, verbose=-1)
    model.fit(train, y_train, eval_set=[(valid, y_valid)], eval_metric="l1",
              callbacks=[lgb.early_stopping(100, verbose=False)])
    return {"model": model, "categories": categories}


def predict(model, X):
    return model["model"].predict(features(X, model["categories"]))


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data.drop(columns=[ID, TARGET]), data[TARGET]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)

    model = train_model(X_train, y_train, X_valid, y_valid)
    mae = mean_absolute_error(y_valid, predict(model, X_valid))
    print(f"Validation mae: {mae:.6f}")

    test = pd.read_csv("test.csv")
    submission = pd.DataFrame({ID: test[ID], TARGET: predict(model, test.drop(columns=[ID]))})
    submission.to_csv("submission.csv", index=False)
