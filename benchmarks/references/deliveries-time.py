import lightgbm as lgb
import pandas as pd
from sklearn.metrics import median_absolute_error
from sklearn.model_selection import train_test_split

TARGET = "time_to_delivery"
ID = "id"


DAYS = {"Mon": 0, "Tue": 1, "Wed": 2, "Thu": 3, "Fri": 4, "Sat": 5, "Sun": 6}


def features(X):
    # the order's size (items in all, distinct items) adds to distance, hour and weekday
    X = X.copy()
    items = [c for c in X.columns if c.startswith("item_")]
    X["n_items"] = X[items].sum(axis=1)
    X["distinct_items"] = (X[items] > 0).sum(axis=1)
    X["day"] = X["day"].astype(str).map(DAYS).astype(float)
    X["weekend"] = (X["day"] >= 5).astype(int)
    return X


def train_model(X_train, y_train, X_valid, y_valid):
    # gradient boosting on absolute error (the metric is a median of absolute errors); the number of
    # trees stops early on the validation split, and the tree size is picked there too
    train, valid = features(X_train), features(X_valid)
    fits = []
    for leaves in (7, 31):
        model = lgb.LGBMRegressor(objective="l1", n_estimators=2000, learning_rate=0.05, num_leaves=leaves,
                                  min_child_samples=20, subsample=0.8, subsample_freq=1, colsample_bytree=0.8,
                                  random_state=0, verbose=-1)
        model.fit(train, y_train, eval_set=[(valid, y_valid)], eval_metric="l1",
                  callbacks=[lgb.early_stopping(100, verbose=False)])
        fits.append(model)
    return min(fits, key=lambda m: median_absolute_error(y_valid, m.predict(valid)))


def predict(model, X):
    return model.predict(features(X))


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data.drop(columns=[ID, TARGET]), data[TARGET]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)

    model = train_model(X_train, y_train, X_valid, y_valid)
    medae = median_absolute_error(y_valid, predict(model, X_valid))
    print(f"Validation medae: {medae:.6f}")

    test = pd.read_csv("test.csv")
    submission = pd.DataFrame({ID: test[ID], TARGET: predict(model, test.drop(columns=[ID]))})
    submission.to_csv("submission.csv", index=False)
