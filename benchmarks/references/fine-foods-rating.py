import pandas as pd
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

TEXT = "text"
TARGET = "score"
POSITIVE = "great"
ID = "id"


def train_model(X_train, y_train, X_valid, y_valid):
    # word uni- and bi-grams (bigrams keep "not good" apart from "good"), sublinear counts, and a
    # logistic regression whose regularisation is picked by validation AUROC
    vectoriser = TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_df=0.9, sublinear_tf=True, strip_accents="unicode")
    train = vectoriser.fit_transform(X_train.fillna("").astype(str))
    valid = vectoriser.transform(X_valid.fillna("").astype(str))
    fits = [LogisticRegression(C=c, max_iter=3000).fit(train, y_train == POSITIVE) for c in (1.0, 4.0, 16.0)]
    best = max(fits, key=lambda m: roc_auc_score(y_valid == POSITIVE, m.predict_proba(valid)[:, 1]))
    return {"vectoriser": vectoriser, "model": best}


def predict(model, X):
    return model["model"].predict_proba(model["vectoriser"].transform(X.fillna("").astype(str)))[:, 1]


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data[TEXT], data[TARGET]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)

    model = train_model(X_train, y_train, X_valid, y_valid)
    auroc = roc_auc_score(y_valid == POSITIVE, predict(model, X_valid))
    print(f"Validation auroc: {auroc:.6f}")

    test = pd.read_csv("test.csv")
    submission = pd.DataFrame({ID: test[ID], TARGET: predict(model, test[TEXT])})
    submission.to_csv("submission.csv", index=False)
