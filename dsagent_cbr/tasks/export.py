"""Write one of our tasks in the DS-Agent/MLAgentBench layout, shaped as DS-Agent's benchmark tasks are:

    OUT/env/train.csv, test.csv        csv tasks: the test rows keep their label column(s), for scoring
    OUT/env/X_train.npy, ...           npy tasks: the arrays, with the test labels in y_test.npy
    OUT/env/submission.py              submit_predictions_for_test_set(y_pred): reads the test labels
                                       itself (by name), prints "final <METRIC> on test set: <value>"
    OUT/env/train.py                   the starter: fixed 20% validation split, train_model/predict
                                       guessing at random, "final <METRIC> on validation set: <value>"
    OUT/scripts/research_problem.txt   the task in words, naming the metric

The starter never reads the test labels, so a grader may strip them from the workspace copy (the
columns or files that submission.py names) and score the predictions with submission.py elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path
from string import Template

from dsagent_cbr.errors import CbrError
from dsagent_cbr.tasks.model import Task

LABEL_FILE = "y_test.npy"
NPY_PUBLIC = ("X_train.npy", "y_train.npy", "X_test.npy")

# How each metric is named in the printed lines (the loader reads the metric back from them).
DISPLAY = {
    "accuracy": "Accuracy",
    "auroc": "AUROC",
    "logloss": "Log loss",
    "rmse": "RMSE",
    "mse": "MSE",
    "mae": "MAE",
    "medae": "MedAE",
    "rmsle": "RMSLE",
    "mcrmse": "MCRMSE",
}

# The body of compute_metric(y_true, y_pred), written into both submission.py and train.py. Each agrees
# with dsagent_cbr.tasks.metrics and needs only numpy (and scikit-learn for AUROC).
_AS_FLOATS = "y_true = np.asarray(y_true, dtype=float)\ny_pred = np.asarray(y_pred, dtype=float).reshape(y_true.shape)\n"
_METRIC_BODY = {
    "rmse": _AS_FLOATS + "return float(np.sqrt(np.mean((y_true - y_pred) ** 2)))",
    "mse": _AS_FLOATS + "return float(np.mean((y_true - y_pred) ** 2))",
    "mae": _AS_FLOATS + "return float(np.mean(np.abs(y_true - y_pred)))",
    "medae": _AS_FLOATS + "return float(np.median(np.abs(y_true - y_pred)))",
    "rmsle": _AS_FLOATS
    + "return float(np.sqrt(np.mean((np.log1p(y_pred) - np.log1p(y_true)) ** 2)))",
    "mcrmse": _AS_FLOATS
    + "return float(np.mean(np.sqrt(np.mean((y_true - y_pred) ** 2, axis=0))))",
    "accuracy": """\
y_true, y_pred = np.asarray(y_true).ravel(), np.asarray(y_pred).ravel()
if y_true.dtype.kind in "biuf" and y_pred.dtype.kind in "biuf":
    return float(np.mean(np.isclose(y_true.astype(float), y_pred.astype(float))))
return float(np.mean(y_true.astype(str) == y_pred.astype(str)))""",
    "auroc": """\
from sklearn.metrics import roc_auc_score

"""
    + _AS_FLOATS
    + """\
if y_true.ndim == 1:
    return float(roc_auc_score(y_true, y_pred))
# several labels: the mean AUROC over the labels that have both classes
return float(np.mean([roc_auc_score(y_true[:, j], y_pred[:, j])
                      for j in range(y_true.shape[1]) if len(np.unique(y_true[:, j])) == 2]))""",
    "logloss": """\
y_pred = np.asarray(y_pred, dtype=float)
if y_pred.ndim == 1:  # two classes, given as the probability of the second
    y_pred = np.stack([1 - y_pred, y_pred], axis=1)
onehot = (np.asarray(y_true).astype(str)[:, None] == np.asarray(CLASSES)[None, :]).astype(float)
p = np.clip(y_pred, 1e-15, 1 - 1e-15)
p = p / p.sum(axis=1, keepdims=True)
return float(-np.mean(np.sum(onehot * np.log(p), axis=1)))""",
}
_METRIC_DOC = {
    "accuracy": "Accuracy: the share of exact labels.",
    "auroc": "Area under the ROC curve (the mean over labels when there are several).",
    "logloss": "Multi-class log loss; one probability column per class, in the order of CLASSES.",
    "rmse": "Root mean squared error.",
    "mse": "Mean squared error.",
    "mae": "Mean absolute error.",
    "medae": "Median absolute error.",
    "rmsle": "Root mean squared logarithmic error.",
    "mcrmse": "Mean over the label columns of each column's RMSE.",
}

_SUBMISSION = Template('''\
$header
def compute_metric(y_true, y_pred):
$metric


def submit_predictions_for_test_set(y_pred):
    """Score the test predictions (in the order of the test rows) against the test labels."""
$load_truth
    score = compute_metric(y_true, y_pred)
    print(f"final $name on test set: {score}")
''')

_STARTER = Template('''\
$header
def compute_metric(y_true, y_pred):
$metric


def train_model(X_train, y_train, X_valid, y_valid):
    # TODO: train a model on (X_train, y_train); X_valid and y_valid are there for early stopping
$guess_train


def predict(model, X):
    # TODO: replace the random guess with $what
    rng = np.random.default_rng(0)
$guess_predict


if __name__ == "__main__":
$load_train
$split

    model = train_model(X_train, y_train, X_valid, y_valid)
    score = compute_metric(y_valid, predict(model, X_valid))
    print(f"final $name on validation set: {score}")

$load_test
    y_pred = predict(model, X_test)
    submit_predictions_for_test_set(y_pred)
''')


@dataclass(frozen=True)
class _Parts:
    imports: list[str]
    labels: list[str]  # constants naming the labels: in submission.py and train.py
    features: list[str]  # constants naming the features: in train.py only
    load_truth: str
    load_train: str
    load_test: str
    split: str
    guess_train: str
    guess_predict: str
    what: str


def export_dsagent(task: Task, out: Path) -> Path:
    """Write `task` (our layout, prepared) at `out` in DS-Agent's layout; returns the folder."""
    out = _export_folder(task, out)
    parts = _npy_parts(task) if task.data_format == "npy" else _csv_parts(task)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Built beside `out` and renamed whole, so a half-written export is never found (a folder's atomicity,
    # not files.py's one-file write).
    staging = out.parent / f".{out.name}.export-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        env, scripts = staging / "env", staging / "scripts"
        env.mkdir(parents=True)
        scripts.mkdir()
        _write_data(task, env)
        (env / "submission.py").write_text(_submission_script(task, parts), encoding="utf-8")
        (env / "train.py").write_text(_starter_script(task, parts), encoding="utf-8")
        (scripts / "research_problem.txt").write_text(research_problem(task), encoding="utf-8")
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def _export_folder(task: Task, out: Path) -> Path:
    """`out`, resolved, once the task is one to export (ours, prepared) and `out` is free (absent or an
    empty folder)."""
    if task.layout != "cbr":
        raise CbrError(
            f"Task {task.name} is already in the {task.layout} layout; only our layout is exported."
        )
    if not task.is_prepared():
        raise CbrError(
            f"Task {task.name} has no data yet: run `cbr tasks prepare {task.name}` first."
        )
    out = Path(out).expanduser().resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CbrError(f"{out} already exists and is not an empty folder; choose another.")
    return out


def _submission_script(task: Task, parts: _Parts) -> str:
    """submission.py: the metric, and the test labels it reads to score the predictions it is given."""
    imports = ["import numpy as np", *parts.imports]
    return _SUBMISSION.substitute(
        header=_header(imports, parts.labels),
        metric=_metric_function(task.metric_name),
        load_truth=parts.load_truth,
        name=DISPLAY[task.metric_name],
    )


def _starter_script(task: Task, parts: _Parts) -> str:
    """train.py, the starter: a fixed validation split and a random guess, its predictions submitted."""
    starter_imports = [
        "import numpy as np",
        *parts.imports,
        "from sklearn.model_selection import train_test_split",
        "from submission import submit_predictions_for_test_set",
    ]
    return _STARTER.substitute(
        header=_header(starter_imports, ["SEED = 42", *parts.features, *parts.labels]),
        metric=_metric_function(task.metric_name),
        guess_train=parts.guess_train,
        guess_predict=parts.guess_predict,
        what=parts.what,
        load_train=parts.load_train,
        split=parts.split,
        load_test=parts.load_test,
        name=DISPLAY[task.metric_name],
    )


def dsagent_copy(task: Task, folder: Path) -> Task:
    """`task` in DS-Agent's layout at `folder`, exported there unless an export is already there."""
    from dsagent_cbr.tasks.loader import load_task

    if not (folder / "env" / "submission.py").is_file():
        export_dsagent(task, folder)
    return load_task(folder)


def research_problem(task: Task) -> str:
    """Our description (already in DS-Agent's words) and where this layout keeps the test labels."""
    if task.data_format == "npy":
        where = (
            f"In this folder the test labels are in `{LABEL_FILE}`, which train.py never reads: it passes "
            "its test predictions to `submit_predictions_for_test_set` (submission.py), which scores them."
        )
    else:
        cols = ", ".join(f"`{c}`" for c in task.target)
        where = (
            f"In this folder `test.csv` also holds the label column(s) {cols}, for scoring only: train.py "
            "never reads them and passes its test predictions, one per test row in order, to "
            "`submit_predictions_for_test_set` (submission.py), which scores them."
        )
    return (
        f"{task.description.strip()}\n\n{where} The evaluation metric is {DISPLAY[task.metric_name]} "
        f"({'higher' if task.direction == 'maximize' else 'lower'} is better).\n"
    )


def _header(imports: list[str], constants: list[str]) -> str:
    blocks = ["\n".join(imports), *(["\n".join(constants)] if constants else [])]
    return "\n\n".join(blocks) + "\n\n"


def _metric_function(metric: str) -> str:
    doc = f'"""{_METRIC_DOC[metric]}"""\n'
    return textwrap.indent(doc + _METRIC_BODY[metric], "    ")


def _write_data(task: Task, env: Path) -> None:
    if task.data_format == "npy":
        for name in NPY_PUBLIC:
            shutil.copy2(task.public_dir / name, env / name)
        assert task.answers
        shutil.copy2(task.private_dir / task.answers, env / LABEL_FILE)
        return
    import pandas as pd

    assert task.answers and task.id_column
    shutil.copy2(task.public_dir / "train.csv", env / "train.csv")
    test = pd.read_csv(task.public_dir / "test.csv")
    answers = pd.read_csv(task.private_dir / task.answers)[[task.id_column, *task.target]]
    merged = test.merge(answers, on=task.id_column, how="left", validate="one_to_one")
    if merged[list(task.target)].isna().all(axis=1).any():
        raise CbrError(
            f"Task {task.name}: some test rows have no answer; the answers file does not match test.csv."
        )
    merged.to_csv(env / "test.csv", index=False)


def _q(value: object) -> str:
    return json.dumps(value)


def _indent(text: str) -> str:
    return textwrap.indent(textwrap.dedent(text).strip("\n"), "    ")


def _positive_label(task: Task) -> str:
    """The positive class of a binary AUROC task, as text: classes[-1], 1, or an unambiguous yes/true."""
    if task.classes:
        return task.classes[-1]
    import pandas as pd

    values = pd.read_csv(task.private_dir / str(task.answers))[task.target[0]]
    if values.dtype.kind in "biuf":
        return "1"
    words = {str(v).lower(): str(v) for v in values.unique()}
    for word in ("yes", "true", "positive"):
        if word in words:
            return words[word]
    raise CbrError(
        f"Task {task.name}: cannot tell the positive class of {task.target[0]}; set data.classes."
    )


def _csv_parts(task: Task) -> _Parts:
    import pandas as pd

    assert task.id_column
    train = pd.read_csv(task.public_dir / "train.csv")
    features = [c for c in train.columns if c != task.id_column and c not in task.target]
    text = task.modality == "text" and len(features) == 1
    multi = len(task.target) > 1
    labels = [f"LABELS = {_q(list(task.target))}  # the label column(s) of train.csv and test.csv"]
    named = [f"ID = {_q(task.id_column)}", *([f"TEXT = {_q(features[0])}"] if text else [])]
    metric = task.metric_name
    y_of = "{frame}[LABELS].to_numpy()" if multi else "{frame}[LABELS[0]].to_numpy()"
    if metric == "auroc" and not multi:
        labels.append(
            f"POSITIVE = {_q(_positive_label(task))}  # the class whose probability is scored"
        )
        y_of = "({frame}[LABELS[0]].astype(str) == POSITIVE).astype(int).to_numpy()"
    if (
        metric == "logloss"
        or metric == "accuracy"
        and train[task.target[0]].dtype.kind not in "biuf"
    ):
        # text labels as a string array, never an object one: predictions saved with np.save then load
        # without pickle
        y_of = "{frame}[LABELS[0]].to_numpy(dtype=str)"
    if metric == "logloss":
        labels.append(
            f"CLASSES = {_q(list(task.classes))}  # one probability column per class, in this order"
        )
    guess_train, guess_predict, what = _guess(metric, multi)
    return _Parts(
        imports=["import pandas as pd"],
        labels=labels,
        features=named,
        load_truth=_indent(f"""
            test = pd.read_csv("test.csv")
            y_true = {y_of.format(frame="test")}
        """),
        load_train=_indent(f"""
            data = pd.read_csv("train.csv")
            X = {"list(data[TEXT].to_numpy())" if text else "data.drop(columns=[ID, *LABELS])"}
            y = {y_of.format(frame="data")}
        """),
        split=_indent(
            "X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=SEED)"
        ),
        load_test=_indent(f"""
            # predict every test row, from the features only (never the label columns)
            test = pd.read_csv("test.csv")
            X_test = {"list(test[TEXT].to_numpy())" if text else "test[X.columns]"}
        """),
        guess_train=guess_train,
        guess_predict=guess_predict,
        what=what,
    )


def _npy_parts(task: Task) -> _Parts:
    forecasting = task.task_type == "forecasting"
    if forecasting:
        split = """
            # the windows are in time order: the last 20% are the validation set
            X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, shuffle=False)
        """
        guess_train, guess_predict, what = _guess("forecast", False)
        shape = "X: (windows, input_length, dims), y: (windows, horizon, dims)"
    else:
        split = """
            _, counts = np.unique(y, return_counts=True)
            stratify = y if counts.min() >= 2 and 0.2 * len(y) >= len(counts) else None
            X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=SEED,
                                                                  stratify=stratify)
        """
        guess_train, guess_predict, what = _guess(task.metric_name, False)
        shape = "X: (cases, channels, length), NaN after the end of a shorter series; y: labels"
    return _Parts(
        imports=[],
        labels=[],
        features=[],
        load_truth=_indent(
            f'y_true = np.load("{LABEL_FILE}", allow_pickle=False)  # the test labels'
        ),
        load_train=_indent(f"""
            # {shape}
            X, y = np.load("X_train.npy"), np.load("y_train.npy")
        """),
        split=_indent(split),
        load_test=_indent('X_test = np.load("X_test.npy")'),
        guess_train=guess_train,
        guess_predict=guess_predict,
        what=what,
    )


def _guess(metric: str, multi: bool) -> tuple[str, str, str]:
    """The starter's random model: (train_model body, predict body, what predict should return)."""
    if metric == "forecast":
        return (
            _indent(
                'return {"low": y_train.min(axis=(0, 1)), "high": y_train.max(axis=(0, 1)), '
                '"shape": y_train.shape[1:]}'
            ),
            _indent(
                'return rng.uniform(model["low"], model["high"], size=(len(X), *model["shape"]))'
            ),
            "the forecasts, shaped (windows, horizon, dims)",
        )
    if metric == "accuracy":
        return (
            _indent('return {"classes": np.unique(y_train)}'),
            _indent('return rng.choice(model["classes"], size=len(X))'),
            "the predicted labels",
        )
    if metric == "auroc":
        if multi:
            return (
                _indent('return {"labels": np.shape(y_train)[1]}'),
                _indent('return rng.uniform(0.0, 1.0, size=(len(X), model["labels"]))'),
                "one probability column per label",
            )
        return (
            _indent("return {}"),
            _indent("return rng.uniform(0.0, 1.0, size=len(X))"),
            "the probability of the POSITIVE class",
        )
    if metric == "logloss":
        return (
            _indent("return {}"),
            _indent("return rng.dirichlet(np.ones(len(CLASSES)), size=len(X))"),
            "one probability column per class, in the order of CLASSES",
        )
    if multi:
        return (
            _indent('return {"low": np.min(y_train, axis=0), "high": np.max(y_train, axis=0)}'),
            _indent(
                'return rng.uniform(model["low"], model["high"], size=(len(X), len(model["low"])))'
            ),
            "the predicted values, one column per label",
        )
    return (
        _indent('return {"low": float(np.min(y_train)), "high": float(np.max(y_train))}'),
        _indent('return rng.uniform(model["low"], model["high"], size=len(X))'),
        "the predicted values",
    )
