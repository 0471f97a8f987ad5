import os

import numpy as np
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split


def train_model(X_train, y_train, X_valid, y_valid):
    # TODO: train a model on (X_train, y_train); X_valid and y_valid are there for early stopping
    return {"classes": np.unique(y_train)}


def predict(model, X):
    # TODO: replace the random guess with the model's predictions
    rng = np.random.default_rng(0)
    return rng.choice(model["classes"], size=len(X))


if __name__ == "__main__":
    # X: (cases, channels, length), NaN after the end of a series shorter than the longest one
    X, y = np.load("X_train.npy"), np.load("y_train.npy")
    _, counts = np.unique(y, return_counts=True)
    stratify = y if counts.min() >= 2 and 0.2 * len(y) >= len(counts) else None
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42, stratify=stratify)

    model = train_model(X_train, y_train, X_valid, y_valid)
    accuracy = accuracy_score(y_valid, predict(model, X_valid))
    print(f"Validation accuracy: {accuracy:.6f}")
    if os.environ.get("CBR_REFIT"):  # cbr --refit: the submitted model also learns from the validation rows
        model = train_model(X, y, X_valid, y_valid)

    X_test = np.load("X_test.npy")
    predictions = np.asarray(predict(model, X_test)).astype(y.dtype)
    np.save("predictions.npy", predictions)
