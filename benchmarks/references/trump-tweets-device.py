import numpy as np
import pandas as pd
from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

TEXT = "text"
TARGET = "device"
CLASSES = ["android", "iphone"]
ID = "id"


def vectorise(model, X):
    # the two phones wrote differently: the words, and the characters around them (links, quotes,
    # hashtags, capitals and punctuation style) both carry the device
    X = X.fillna("").astype(str)
    return hstack([model["words"].transform(X), model["chars"].transform(X)]).tocsr()


def train_model(X_train, y_train, X_valid, y_valid):
    model = {"words": TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, lowercase=False),
             "chars": TfidfVectorizer(analyzer="char", ngram_range=(2, 5), min_df=3, sublinear_tf=True,
                                      lowercase=False, max_features=200000)}
    model["words"].fit(X_train.fillna("").astype(str))
    model["chars"].fit(X_train.fillna("").astype(str))
    train, valid = vectorise(model, X_train), vectorise(model, X_valid)
    fits = [LogisticRegression(C=c, max_iter=3000).fit(train, y_train) for c in (0.5, 2.0, 8.0)]
    model["classifier"] = min(fits, key=lambda m: log_loss(y_valid, m.predict_proba(valid), labels=m.classes_))
    return model


def predict(model, X):
    classifier = model["classifier"]
    proba = classifier.predict_proba(vectorise(model, X))
    return proba[:, [list(classifier.classes_).index(c) for c in CLASSES]]


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data[TEXT], data[TARGET]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)

    model = train_model(X_train, y_train, X_valid, y_valid)
    loss = log_loss(y_valid, predict(model, X_valid), labels=CLASSES)
    print(f"Validation logloss: {loss:.6f}")

    test = pd.read_csv("test.csv")
    submission = pd.DataFrame(np.asarray(predict(model, test[TEXT])), columns=CLASSES)
    submission.insert(0, ID, test[ID].to_numpy())
    submission.to_csv("submission.csv", index=False)
