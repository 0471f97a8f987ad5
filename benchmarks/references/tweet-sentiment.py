import numpy as np
import pandas as pd
from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.model_selection import train_test_split

TEXT = "text"
TARGETS = ["sentiment_mean", "sentiment_sd"]
ID = "id"


def mcrmse(y_true, y_pred):
    errors = np.asarray(y_true, dtype=float) - np.asarray(y_pred, dtype=float)
    return float(np.mean(np.sqrt(np.mean(errors**2, axis=0))))


def vectorise(model, X):
    X = X.fillna("").astype(str)
    return hstack([model["words"].transform(X), model["chars"].transform(X)]).tocsr()


def train_model(X_train, y_train, X_valid, y_valid):
    # sentiment in short tweets lives in words, emoticons, elongations and exclamation marks: word
    # and character n-grams (case kept: "AMAZING" is not "amazing") into one ridge per target, each
    # target with its own penalty picked on validation (the spread is much noisier than the mean)
    model = {"words": TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True),
             "chars": TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4), min_df=2, sublinear_tf=True,
                                      lowercase=False)}
    model["words"].fit(X_train.fillna("").astype(str))
    model["chars"].fit(X_train.fillna("").astype(str))
    train, valid = vectorise(model, X_train), vectorise(model, X_valid)
    y, truth = y_train.to_numpy(dtype=float), y_valid.to_numpy(dtype=float)
    model["low"], model["high"] = y.min(axis=0), y.max(axis=0)  # ratings live on a bounded scale
    model["ridges"] = []
    for j in range(y.shape[1]):
        fits = [Ridge(alpha=a).fit(train, y[:, j]) for a in (0.3, 1.0, 3.0, 10.0, 30.0)]
        error = [np.sqrt(np.mean((np.clip(m.predict(valid), model["low"][j], model["high"][j]) - truth[:, j]) ** 2))
                 for m in fits]
        model["ridges"].append(fits[int(np.argmin(error))])
    return model


def predict(model, X):
    features = vectorise(model, X)
    return np.clip(np.column_stack([m.predict(features) for m in model["ridges"]]), model["low"], model["high"])


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
