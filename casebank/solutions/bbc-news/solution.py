import pandas as pd
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_union

TEXT = "text"
TARGET = "category"
ID = "id"


def text_features():
    # Words catch topic and sentiment vocabulary; character n-grams within word boundaries catch
    # inflections, misspellings and punctuation that a word vocabulary splits apart.
    return make_union(
        TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=50_000),
        # Articles are long, so a capped vocabulary keeps training quick without costing accuracy.
        TfidfVectorizer(
            analyzer="char_wb", ngram_range=(3, 5), min_df=3, sublinear_tf=True, max_features=50_000
        ),
    )


def train_model(X_train, y_train, X_valid, y_valid):
    features = text_features()
    A_train = features.fit_transform(X_train.fillna(""))
    A_valid = features.transform(X_valid.fillna(""))
    best = None
    # The penalty is the one setting that matters much for a linear model on TF-IDF; pick it on validation.
    for C in (4.0, 16.0):
        classifier = LogisticRegression(C=C, max_iter=3000).fit(A_train, y_train)
        score = accuracy_score(y_valid, classifier.predict(A_valid))
        if best is None or score > best[0]:
            best = (score, classifier)
    return {"features": features, "classifier": best[1]}


def predict(model, X):
    return model["classifier"].predict(model["features"].transform(X.fillna("")))


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data[TEXT], data[TARGET]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)

    model = train_model(X_train, y_train, X_valid, y_valid)
    accuracy = accuracy_score(y_valid, predict(model, X_valid))
    print(f"Validation accuracy: {accuracy:.6f}")

    test = pd.read_csv("test.csv")
    submission = pd.DataFrame({ID: test[ID], TARGET: predict(model, test[TEXT])})
    submission.to_csv("submission.csv", index=False)
