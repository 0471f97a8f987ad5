"""DS-Agent-layout folders built from our prepared tasks' real data, with starters written the ways
DS-Agent's own are: the test frame's label column dropped by a list (`drop(['y'], axis=1)`), by
`columns=`, or after `dropna(subset=[...])`; submission.py reads the labelled test.csv itself."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd

from dsagent_cbr.tasks.model import Task

# How the starter takes the label out of the test frame, as DS-Agent's scripts do.
PATTERNS = {
    "drop-list": "test_df = test_df.drop(['{label}'], axis=1)",
    "drop-columns": "test_df = test_df.drop(columns=['{label}'])",
    "dropna-subset": "test_df = test_df.dropna(subset=['{label}'])\n    test_df = test_df.drop(columns=['{label}'])",
}
METRIC_CODE = {
    "accuracy": ("accuracy", "float(np.mean(np.asarray(y_true).astype(str) == np.asarray(y_pred).astype(str)))",
                 "rng.choice(np.asarray(sorted(set(model))), size=len(X))"),
    "mae": ("MAE", "float(np.mean(np.abs(np.asarray(y_true, dtype=float) - np.asarray(y_pred, dtype=float))))",
            "rng.uniform(min(model), max(model), size=len(X))"),
}

SUBMISSION = """
import numpy as np
import pandas as pd

def submit_predictions_for_test_set(y_pred):
    y_true = pd.read_csv("test.csv")["{label}"].to_numpy()
    score = {score}
    print("final {name} on test set: ", score)
"""

STARTER = """
import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split
from submission import submit_predictions_for_test_set


def train_model(X_train, y_train, X_valid, y_valid):
    # TODO: train a model
    return list(y_train)


def predict(model, X):
    # TODO: predict with the model
    rng = np.random.default_rng(0)
    return {guess}


def compute_metric(y_true, y_pred):
    return {score}


if __name__ == "__main__":
    data_df = pd.read_csv("train.csv")
    X = data_df.drop(['{label}'], axis=1)
    y = data_df['{label}']
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)
    model = train_model(X_train, y_train, X_valid, y_valid)
    print("final {name} on validation set: ", compute_metric(y_valid, predict(model, X_valid)))

    test_df = pd.read_csv("test.csv")
    {take_label_out}
    submit_predictions_for_test_set(predict(model, test_df))
"""


def dsagent_pattern_folder(task: Task, root: Path, pattern: str, metric: str, words: str) -> Path:
    """A DS-Agent folder of `task`'s data (its test rows labelled, in env/test.csv) whose starter takes
    the label out of the test frame by `pattern`."""
    env, scripts = root / "env", root / "scripts"
    env.mkdir(parents=True)
    scripts.mkdir()
    label = task.target[0]
    pd.read_csv(task.public_dir / "train.csv").to_csv(env / "train.csv", index=False)
    test = pd.read_csv(task.public_dir / "test.csv").merge(pd.read_csv(task.private_dir / "answers.csv"), on="id")
    test.to_csv(env / "test.csv", index=False)
    name, score, guess = METRIC_CODE[metric]
    (scripts / "research_problem.txt").write_text(f"{words} The evaluation metric is {name}. Fill in train.py.")
    (env / "submission.py").write_text(SUBMISSION.format(label=label, name=name, score=score))
    take_out = PATTERNS[pattern].format(label=label)
    (env / "train.py").write_text(textwrap.dedent(STARTER).format(label=label, name=name, guess=guess,
                                                                 score=score, take_label_out=take_out))
    return root
