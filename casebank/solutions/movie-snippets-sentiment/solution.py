import numpy as np
import pandas as pd
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_union

TEXT = "text"
TARGETS = ["sentiment_mean", "sentiment_sd"]
ID = "id"


def mcrmse(y_true, y_pred):
    errors = np.asarray(y_true, dtype=float) - np.asarray(y_pred, dtype=float)
    return float(np.mean(np.sqrt(np.mean(errors**2, axis=0))))


def text_features():
    # Words carry most of the sentiment; character n-grams within word boundaries add negation
    # fragments, intensifying punctuation and spelling variants.
    return make_union(
        TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=200_000),
        TfidfVectorizer(
            analyzer="char_wb", ngram_range=(2, 5), min_df=2, sublinear_tf=True, max_features=300_000
        ),
    )


def train_model(X_train, y_train, X_valid, y_valid):
    features = text_features()
    A_train = features.fit_transform(X_train.fillna(""))
    A_valid = features.transform(X_valid.fillna(""))
    y_train = np.asarray(y_train, dtype=float)
    # One ridge per target so each gets its own penalty: the mean is far more predictable than the spread.
    models, low, high = [], y_train.min(axis=0), y_train.max(axis=0)
    for j in range(y_train.shape[1]):
        best = None
        for alpha in (0.3, 1.0, 3.0, 10.0):
            ridge = Ridge(alpha=alpha).fit(A_train, y_train[:, j])
            guess = np.clip(ridge.predict(A_valid), low[j], high[j])
            error = float(np.sqrt(np.mean((np.asarray(y_valid, dtype=float)[:, j] - guess) ** 2)))
            if best is None or error < best[0]:
                best = (error, ridge)
        models.append(best[1])
    return {"features": features, "models": models, "low": low, "high": high}


def predict(model, X):
    A = model["features"].transform(X.fillna(""))
    columns = [ridge.predict(A) for ridge in model["models"]]
    return np.clip(np.column_stack(columns), model["low"], model["high"])


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data[TEXT], data[TARGETS]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)

    model = train_model(X_train, y_train, X_valid, y_valid)
    score = mcrmse(y_valid, predict(model, X_valid))
    print(f"Validation mcrmse: {score:.6f}")

    test = pd.read_csv("test.csv")
    submission = pd.DataFrame(np.asarray(predict(model, test[TEXT])), columns=TARGETS)
    submission.insert(0, ID, test[ID].to_numpy())
    submission.to_csv("submission.csv", index=False)
