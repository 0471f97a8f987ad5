"""The starter train.py of a csv task, written to the shared skeleton (docs/task-format.md): constants
naming the columns, train_model/predict with a random guess, then the fixed part (load, 20% validation
split with seed 42, `Validation <metric>: <value>`, the refit on all rows under CBR_REFIT, submission.csv
in sample_submission's columns and test.csv's row order). The constant names (TARGET/TARGETS, ID, TEXT, CLASSES, POSITIVE) are the ones
the task suite's starters use, so past solutions transplant onto these starters unchanged."""

from __future__ import annotations

import json
from dataclasses import dataclass

from dsagent_cbr.python_syntax import parse as parse_python

# Regression metrics as the grader computes them (dsagent_cbr.tasks.metrics), written out in numpy.
_REGRESSION_FUNCTIONS = {
    "rmse": "float(np.sqrt(np.mean((y_true - y_pred) ** 2)))",
    "mse": "float(np.mean((y_true - y_pred) ** 2))",
    "mae": "float(np.mean(np.abs(y_true - y_pred)))",
    "medae": "float(np.median(np.abs(y_true - y_pred)))",
    "rmsle": "float(np.sqrt(np.mean((np.log1p(y_pred) - np.log1p(y_true)) ** 2)))",
    "mcrmse": "float(np.mean(np.sqrt(np.mean((y_true - y_pred) ** 2, axis=0))))",
}


@dataclass(frozen=True)
class StarterSpec:
    modality: str  # tabular | text
    task_type: str
    metric: str
    targets: tuple[str, ...]
    id_column: str
    text_column: str | None = None
    classes: tuple[str, ...] = ()  # logloss: the probability columns
    positive: object = None  # binary AUROC: the label whose probability is predicted


def _literal(value: object) -> str:
    """A Python literal in the suite's style (double-quoted strings)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)


def _guess_and_score(spec: StarterSpec) -> tuple[list[str], str, str, str]:
    """(imports, model returned by train_model, predict's random guess, validation score expression)."""
    m, multi = spec.metric, len(spec.targets) > 1
    if m in _REGRESSION_FUNCTIONS:
        if multi:
            return (
                [],
                '{"low": y_train.min().to_numpy(), "high": y_train.max().to_numpy()}',
                'rng.uniform(model["low"], model["high"], size=(len(X), len(model["low"])))',
                f"{m}(y_valid, predict(model, X_valid))",
            )
        low = "max(float(y_train.min()), 0.0)" if m == "rmsle" else "float(y_train.min())"
        return (
            [],
            f'{{"low": {low}, "high": float(y_train.max())}}',
            'rng.uniform(model["low"], model["high"], size=len(X))',
            f"{m}(y_valid, predict(model, X_valid))",
        )
    if m == "accuracy":
        return (
            ["from sklearn.metrics import accuracy_score"],
            '{"labels": sorted(y_train.unique())}',
            'rng.choice(model["labels"], size=len(X))',
            "accuracy_score(y_valid, predict(model, X_valid))",
        )
    if m == "logloss":
        return (
            ["from sklearn.metrics import log_loss"],
            "{}",
            "rng.dirichlet(np.ones(len(CLASSES)), size=len(X))",
            "log_loss(y_valid, predict(model, X_valid), labels=CLASSES)",
        )
    if m == "auroc" and multi:
        return (
            ["from sklearn.metrics import roc_auc_score"],
            "{}",
            "rng.uniform(0.0, 1.0, size=(len(X), len(TARGETS)))",
            'roc_auc_score(y_valid, predict(model, X_valid), average="macro")',
        )
    if m == "auroc":
        return (
            ["from sklearn.metrics import roc_auc_score"],
            "{}",
            "rng.uniform(0.0, 1.0, size=len(X))",
            "roc_auc_score(y_valid == POSITIVE, predict(model, X_valid))",
        )
    raise ValueError(f"no starter for metric {m}")


_PREDICT_TODO = {
    "accuracy": "the model's predicted labels",
    "logloss": "the model's class probabilities, one column per CLASSES entry",
    "auroc": "the model's probability that TARGET is POSITIVE",
}


def starter_script(spec: StarterSpec) -> str:
    imports, model, guess, score = _guess_and_score(spec)
    multi = len(spec.targets) > 1
    lines = [
        *_header(spec, imports, multi),
        *_functions(spec, model, guess, multi),
        *_main_block(spec, score, multi),
    ]
    code = "\n".join(lines) + "\n"
    parse_python(code)
    return code


def _header(spec: StarterSpec, imports: list[str], multi: bool) -> list[str]:
    """The imports and the constants naming the columns (and the classes, or the positive label)."""
    lines = [
        "import os",
        "",
        "import numpy as np",
        "import pandas as pd",
        *imports,
        "from sklearn.model_selection import train_test_split",
        "",
    ]
    if spec.text_column:
        lines.append(f"TEXT = {_literal(spec.text_column)}")
    lines.append(
        f"TARGETS = {_literal(spec.targets)}" if multi else f"TARGET = {_literal(spec.targets[0])}"
    )
    if spec.metric == "logloss":
        lines.append(f"CLASSES = {_literal(spec.classes)}")
    if spec.metric == "auroc" and not multi:
        lines.append(f"POSITIVE = {_literal(spec.positive)}")
    return [*lines, f"ID = {_literal(spec.id_column)}", "", ""]


def _functions(spec: StarterSpec, model: str, guess: str, multi: bool) -> list[str]:
    """The regression metric written out (numpy's), then train_model and predict with the random guess."""
    lines = []
    if spec.metric in _REGRESSION_FUNCTIONS:
        lines += [
            f"def {spec.metric}(y_true, y_pred):",
            "    y_true, y_pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)",
            f"    return {_REGRESSION_FUNCTIONS[spec.metric]}",
            "",
            "",
        ]
    return [
        *lines,
        "def train_model(X_train, y_train, X_valid, y_valid):",
        "    # TODO: train a model on (X_train, y_train); X_valid and y_valid are there for early stopping",
        f"    return {model}",
        "",
        "",
        "def predict(model, X):",
        f"    # TODO: replace the random guess with {_predict_todo(spec, multi)}",
        "    rng = np.random.default_rng(0)",
        f"    return {guess}",
        "",
        "",
    ]


def _predict_todo(spec: StarterSpec, multi: bool) -> str:
    """What predict should return instead of the guess, as its TODO says."""
    if spec.metric == "auroc" and multi:
        return "one probability column per label in TARGETS"
    if spec.metric in _REGRESSION_FUNCTIONS:
        return "the model's predictions" + (", shape (len(X), len(TARGETS))" if multi else "")
    return _PREDICT_TODO[spec.metric]


def _main_block(spec: StarterSpec, score: str, multi: bool) -> list[str]:
    """The fixed part: load, the validation split and score, the refit under CBR_REFIT, submission.csv."""
    target_name = "TARGETS" if multi else "TARGET"
    y = f"data[{target_name}]" + (".astype(str)" if spec.metric == "logloss" else "")
    if spec.text_column:
        features, test_features = "data[TEXT]", "test[TEXT]"
    else:
        drop = f"[ID, *{target_name}]" if multi else f"[ID, {target_name}]"
        features, test_features = f"data.drop(columns={drop})", "test.drop(columns=[ID])"
    return [
        'if __name__ == "__main__":',
        '    data = pd.read_csv("train.csv")',
        f"    X, y = {features}, {y}",
        "    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42)",
        "",
        "    model = train_model(X_train, y_train, X_valid, y_valid)",
        f"    score = {score}",
        f'    print(f"Validation {spec.metric}: {{score:.6f}}")',
        '    if os.environ.get("CBR_REFIT"):  # cbr\'s refit: the submitted model also learns from the validation rows',
        "        model = train_model(X, y, X_valid, y_valid)",
        "",
        '    test = pd.read_csv("test.csv")',
        *_submission_lines(spec, multi, test_features),
        '    submission.to_csv("submission.csv", index=False)',
    ]


def _submission_lines(spec: StarterSpec, multi: bool, test_features: str) -> list[str]:
    """The submission frame: the id column, then one column per target (or class probability)."""
    if multi or spec.metric == "logloss":
        columns = "CLASSES" if spec.metric == "logloss" else "TARGETS"
        return [
            f"    submission = pd.DataFrame(np.asarray(predict(model, {test_features})), columns={columns})",
            "    submission.insert(0, ID, test[ID].to_numpy())",
        ]
    return [
        f"    submission = pd.DataFrame({{ID: test[ID], TARGET: predict(model, {test_features})}})"
    ]
