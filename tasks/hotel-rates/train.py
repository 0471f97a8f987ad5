import os

import numpy as np
import pandas as pd
from sklearn.metrics import mean_absolute_error
from sklearn.model_selection import train_test_split

TARGET = "avg_price_per_room"
ID = "id"


def train_model(X_train, y_train, X_valid, y_valid):
    # TODO: train a model on (X_train, y_train); X_valid and y_valid are there for early stopping
    return {"low": float(y_train.min()), "high": float(y_train.max())}


def predict(model, X):
    # TODO: replace the random guess with the model's predictions
    rng = np.random.default_rng(0)
    return rng.uniform(model["low"], model["high"], size=len(X))


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data.drop(columns=[ID, TARGET]), data[TARGET]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)

    model = train_model(X_train, y_train, X_valid, y_valid)
    mae = mean_absolute_error(y_valid, predict(model, X_valid))
    print(f"Validation mae: {mae:.6f}")
    if os.environ.get("CBR_REFIT"):  # cbr --refit: the submitted model also learns from the validation rows
        model = train_model(X, y, X_valid, y_valid)

    test = pd.read_csv("test.csv")
    submission = pd.DataFrame({ID: test[ID], TARGET: predict(model, test.drop(columns=[ID]))})
    submission.to_csv("submission.csv", index=False)
