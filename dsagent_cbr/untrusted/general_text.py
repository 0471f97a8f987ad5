"""Runs untrusted, inside the sandbox, adapted into a task's starter as the search's first text draft.
cbr's general solution for text: word and character TF-IDF features and a linear model, the strong
default for short documents. `cbr` writes a logistic regression for a classification task."""

from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import Ridge


def features(vectorizers, X):
    texts = [str(x) if x is not None else "" for x in X]
    return sparse.hstack([v.transform(texts) for v in vectorizers], format="csr")


def train_model(X_train, y_train, X_valid, y_valid):
    texts = [str(x) if x is not None else "" for x in X_train]
    vectorizers = [TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=100000, sublinear_tf=True),
                   TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=3, max_features=100000,
                                   sublinear_tf=True)]
    for vectorizer in vectorizers:
        vectorizer.fit(texts)
    model = Ridge(alpha=1.0)
    model.fit(features(vectorizers, X_train), y_train)
    return {"model": model, "vectorizers": vectorizers}


def predict(model, X):
    return model["model"].predict(features(model["vectorizers"], X))
