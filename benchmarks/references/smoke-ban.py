import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

TARGET = "smoker"
ID = "id"


def encode(X, columns=None):
    # one-hot the categories (ban, education, afam, hispanic, gender); age also as a squared term,
    # since smoking rises and then falls with age
    X = pd.get_dummies(X.assign(age_sq=X["age"] ** 2 / 100.0), dtype=float)
    return X if columns is None else X.reindex(columns=columns, fill_value=0.0)


def train_model(X_train, y_train, X_valid, y_valid):
    # a regularised logistic regression and shallow boosted trees (which can find interactions such
    # as education by age); the validation split picks one, nothing is refitted on it
    train = encode(X_train)
    valid = encode(X_valid, train.columns)
    candidates = [make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000)) for c in (0.01, 0.1, 1.0)]
    candidates += [HistGradientBoostingClassifier(max_depth=d, learning_rate=0.05, max_iter=300, random_state=0)
                   for d in (2, 3)]
    fitted = [m.fit(train, y_train) for m in candidates]
    best = max(fitted, key=lambda m: accuracy_score(y_valid, m.predict(valid)))
    return {"model": best, "columns": train.columns}


def predict(model, X):
    return model["model"].predict(encode(X, model["columns"]))


if __name__ == "__main__":
    data = pd.read_csv("train.csv")
    X, y = data.drop(columns=[ID, TARGET]), data[TARGET]
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)

    model = train_model(X_train, y_train, X_valid, y_valid)
    accuracy = accuracy_score(y_valid, predict(model, X_valid))
    print(f"Validation accuracy: {accuracy:.6f}")

    test = pd.read_csv("test.csv")
    submission = pd.DataFrame({ID: test[ID], TARGET: predict(model, test.drop(columns=[ID]))})
    submission.to_csv("submission.csv", index=False)
