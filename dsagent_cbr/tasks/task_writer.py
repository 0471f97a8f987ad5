"""Writing a new task's folder, for `cbr tasks new`.

It holds the text of task.toml and of description.md, and the write of the whole folder: data/, the
starter train.py and, with a hold-out, private/answers.csv. The folder is built beside its destination.
It is renamed into place only when complete.

It is apart from tasks/create.py, which infers what the task is. This module only puts it in files."""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path
from typing import Any

from dsagent_cbr.tasks.infer import NewTaskReport
from dsagent_cbr.tasks.metrics import get_metric

METRIC_WORDS = {
    "rmse": "root mean squared error (RMSE)",
    "mse": "mean squared error (MSE)",
    "mae": "mean absolute error (MAE)",
    "medae": "median absolute error",
    "rmsle": "root mean squared logarithmic error (RMSLE)",
    "mcrmse": "mean columnwise root mean squared error (MCRMSE): the RMSE of each "
    "target column, averaged",
    "accuracy": "accuracy",
    "auroc": "area under the ROC curve (AUROC)",
    "logloss": "multi-class log loss",
}


def _toml_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def task_toml(
    name: str, report: NewTaskReport, source: str, public: list[str], sources: tuple[str, ...] = ()
) -> str:
    metric = get_metric(report.metric)
    lines = [
        f"name = {_toml_value(name)}",
        f"modality = {_toml_value(report.modality)}",
        f"task_type = {_toml_value(report.task_type)}",
        f"metric = {_toml_value(metric.name)}",
        f"direction = {_toml_value(metric.direction)}",
        'stage = "development"',
        "paired_with = []",
        f"source = {_toml_value(source)}",
    ]
    if sources:
        lines.append(f"sources = {_toml_value(list(sources))}")
    lines += ["", "[data]", 'format = "csv"', f"public = {_toml_value(public)}"]
    if report.has_answers:
        lines.append('answers = "answers.csv"')
    else:
        lines.append(
            "# no answers: the test rows are unlabelled; rows held back from train judge the runs"
        )
    lines += [
        'predictions = "submission.csv"',
        f"id_column = {_toml_value(report.id_column)}",
        f"target = {_toml_value(report.target)}",
    ]
    if report.classes:
        lines.append(f"classes = {_toml_value(report.classes)}")
    return "\n".join(lines) + "\n"


_KIND_WORDS = {
    "regression": "regression",
    "binary-classification": "binary classification",
    "multiclass-classification": "multi-class classification",
    "multilabel-classification": "multi-label classification",
}


def describe(
    report: NewTaskReport, source: str, n_train: int, n_test: int, card: str, positive: Any
) -> str:
    targets = ", ".join(f"`{t}`" for t in report.target)
    kind = _KIND_WORDS[report.task_type]
    if report.task_type == "regression" and len(report.target) > 1:
        kind += f" with {len(report.target)} targets"
    text = f" with the free-text column `{report.text_column}`" if report.text_column else ""
    metric = get_metric(report.metric)
    better = "higher is better" if metric.direction == "maximize" else "lower is better"
    if report.metric == "logloss":
        form = f"one probability per class, in the columns {', '.join(f'`{c}`' for c in report.classes)}"
    elif report.metric == "auroc" and len(report.target) == 1:
        form = f"the probability that {targets} is {json.dumps(positive)}"
    elif report.metric == "auroc":
        form = "one probability per label column"
    elif report.metric == "accuracy":
        form = "the predicted label"
    else:
        form = "the predicted value" + ("s" if len(report.target) > 1 else "")
    answers = (
        "The test answers are held out for grading."
        if report.has_answers
        else "The test rows are unlabelled: a solution is judged on labelled rows held back from it, and "
        "its submission.csv is what would be uploaded."
    )
    return (
        f"You are solving this machine learning task of {kind}: the dataset presented here ({source}) "
        f"comprises {n_train:,} labelled rows in `train.csv`{text} and {n_test:,} rows to predict in "
        f"`test.csv`. Your task is to predict {targets} for the rows of `test.csv`, as {form}, identified "
        f"by `{report.id_column}`. The evaluation metric is {METRIC_WORDS[report.metric]}; {better}. "
        f"{answers} We provide an overall pipeline in train.py; fill in the model in `train_model` and "
        f"`predict`, keeping the data split and the output as they are.\n\n{card}"
    )


def write_task_folder(
    dest: Path,
    report: NewTaskReport,
    source: str,
    train: Any,
    test: Any,
    sample: Any,
    answers: Any,
    positive: Any,
    sources: tuple[str, ...] = (),
) -> None:
    """The task folder at `dest`, and the list of its files on the report."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    # The whole task folder is built beside `dest` and renamed into place, so a half-made task is never
    # found. That is a folder's atomicity, not files.py's one-file write: its files need no fsync each.
    tmp = dest.parent / f".{dest.name}.tmp-{secrets.token_hex(3)}"
    try:
        public = ["train.csv", "test.csv", "sample_submission.csv"]
        _write_data(tmp, train, test, sample, answers)
        _write_texts(
            tmp, dest.name, report, source, public, (len(train), len(test)), positive, sources
        )
        if dest.exists():
            dest.rmdir()  # empty, checked above
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    report.files = ["task.toml", "description.md", "train.py", *(f"data/{p}" for p in public)] + (
        ["private/answers.csv"] if answers is not None else []
    )


def _write_data(tmp: Path, train: Any, test: Any, sample: Any, answers: Any) -> None:
    """data/ with the three public files, and private/answers.csv when the test rows have answers."""
    (tmp / "data").mkdir(parents=True)
    train.to_csv(tmp / "data" / "train.csv", index=False)
    test.to_csv(tmp / "data" / "test.csv", index=False)
    sample.to_csv(tmp / "data" / "sample_submission.csv", index=False)
    if answers is not None:
        (tmp / "private").mkdir()
        answers.to_csv(tmp / "private" / "answers.csv", index=False)


def _write_texts(
    tmp: Path,
    name: str,
    report: NewTaskReport,
    source: str,
    public: list[str],
    sizes: tuple[int, int],
    positive: Any,
    sources: tuple[str, ...],
) -> None:
    """train.py, description.md (its data card read from data/, written first) and task.toml."""
    from dsagent_cbr.tasks.datacard import csv_card
    from dsagent_cbr.tasks.starter import StarterSpec, starter_script

    spec = StarterSpec(
        modality=report.modality,
        task_type=report.task_type,
        metric=report.metric,
        targets=tuple(report.target),
        id_column=report.id_column,
        text_column=report.text_column,
        classes=tuple(report.classes),
        positive=positive,
    )
    (tmp / "train.py").write_text(starter_script(spec), encoding="utf-8")
    metric = get_metric(report.metric)
    card = csv_card(
        tmp / "data",
        public,
        target=report.target,
        id_column=report.id_column,
        metric=metric.name,
        direction=metric.direction,
        task_type=report.task_type,
        classes=report.classes if metric.name == "logloss" else None,
    )
    (tmp / "description.md").write_text(
        describe(report, source, *sizes, card, positive), encoding="utf-8"
    )
    toml = task_toml(name, report, source, public, sources)
    (tmp / "task.toml").write_text(toml, encoding="utf-8")
