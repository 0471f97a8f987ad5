import numpy as np
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split

SPLITS = (1, 2, 3, 4, 6, 8, 16)  # each gesture cut into this many equal pieces of its own duration


def piece_summary(s):
    out = []
    for k in SPLITS:
        for part in np.array_split(s, k):
            part = part if len(part) else np.zeros(1)
            out += [part.mean(), part.std(), part.min(), part.max()]
    return out


def features(X):
    # Who made a gesture shows in its duration, its strength and the course of the acceleration:
    # level, spread and extremes of each phase of the movement (pieces of its own duration, so fast
    # and slow gestures line up), the same for the change in acceleration, and the log duration.
    rows = []
    for series in np.asarray(X, dtype=float)[:, 0, :]:
        s = series[~np.isnan(series)]
        s = s if len(s) > 1 else np.zeros(2)
        rows.append(piece_summary(s) + piece_summary(np.diff(s)) + [np.log(len(s)), np.abs(s).max()])
    return np.nan_to_num(np.array(rows))


def train_model(X_train, y_train, X_valid, y_valid):
    # two kinds of forest over these summaries (50 cases: no room for a learned representation);
    # the validation split picks one
    train, valid = features(X_train), features(X_valid)
    fits = [forest(n_estimators=1000, random_state=0).fit(train, y_train)
            for forest in (RandomForestClassifier, ExtraTreesClassifier)]
    return max(fits, key=lambda m: accuracy_score(y_valid, m.predict(valid)))


def predict(model, X):
    return model.predict(features(X))


if __name__ == "__main__":
    # X: (cases, channels, length), NaN after the end of a series shorter than the longest one
    X, y = np.load("X_train.npy"), np.load("y_train.npy")
    _, counts = np.unique(y, return_counts=True)
    stratify = y if counts.min() >= 2 and 0.2 * len(y) >= len(counts) else None
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42, stratify=stratify)

    model = train_model(X_train, y_train, X_valid, y_valid)
    accuracy = accuracy_score(y_valid, predict(model, X_valid))
    print(f"Validation accuracy: {accuracy:.6f}")

    X_test = np.load("X_test.npy")
    predictions = np.asarray(predict(model, X_test)).astype(y.dtype)
    np.save("predictions.npy", predictions)
