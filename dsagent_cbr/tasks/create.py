"""`cbr tasks new`: a task from a user's CSV files or a Kaggle competition folder.

It takes what tasks/infer.py makes of the files: target and id, modality, task type, a default metric,
each with its reason. It checks them, lines up the test rows or carves a hold-out from train, and makes
the sample submission. A task without answers is valid: it has no test score, and the selection rows cbr
holds back from train.csv judge its runs. Bad input gets one sentence (NewTaskError, exit 2), and
nothing is left behind.

Reading the files is tasks/user_files.py's. Writing the folder is tasks/task_writer.py's."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsagent_cbr.tasks.infer import (
    METRICS_FOR,
    NewTaskError,
    NewTaskReport,
    check_finite_target,
    check_metric,
    check_unique,
    default_metric,
    infer_id,
    infer_modality,
    infer_targets,
    infer_task_type,
    is_number,
)
from dsagent_cbr.tasks.metrics import get_metric
from dsagent_cbr.tasks.sources import SOURCES_FILE, entry_problem, folder_sources
from dsagent_cbr.tasks.task_writer import METRIC_WORDS, write_task_folder
from dsagent_cbr.tasks.user_files import SEPARATOR_WORDS, read_csv


@dataclass
class NewTaskRequest:
    dest: Path
    train: Path
    test: Path | None = None
    sample: Path | None = None
    target: tuple[str, ...] = ()
    id_column: str | None = None
    metric: str | None = None
    text_column: str | None = None
    task_type: str | None = None
    holdout: float | None = None
    seed: int = 0
    source: str | None = None
    # package data the files came from ("package:path", tasks/sources.py)
    sources: tuple[str, ...] = ()


def create_task(req: NewTaskRequest) -> NewTaskReport:
    """Infer, check and write the task folder; raises NewTaskError on bad input, leaving nothing behind.
    Each step records what it inferred on the report, which later steps read."""
    _check_request(req)
    report = NewTaskReport(dest=req.dest)
    sources = declared_sources(req)
    train, test, sample = _read_files(req, report)
    train, made_id = _infer_columns(train, test, sample, req, report)
    train, test = _line_up_ids(train, test, made_id, report)
    y = train[report.target]
    sample_values = (
        sample[report.target[0]]
        if sample is not None and report.target[0] in sample.columns
        else None
    )
    labels = _infer_task_type(y, sample_values, req, report)
    positive = _choose_metric(y, sample_values, labels, req, report)
    _infer_modality(train, req, report)
    train, test, answers = _test_rows(train, test, sample, req, report)
    made = _sample_submission(report, y, test, sample, answers)
    source = (
        req.source
        or f"user files: {', '.join(p.name for p in (req.train, req.test, req.sample) if p)}"
    )
    write_task_folder(req.dest, report, source, train, test, made, answers, positive, sources)
    return report


def _check_request(req: NewTaskRequest) -> None:
    """What is wrong with the request before any file is read."""
    dest = req.dest
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise NewTaskError(f"{dest} already exists; choose a new folder for the task.")
    if req.holdout is not None and not 0 < req.holdout < 1:
        raise NewTaskError(f"--holdout must be a fraction between 0 and 1, not {req.holdout}.")


def _read_files(req: NewTaskRequest, report: NewTaskReport) -> tuple[Any, Any, Any]:
    """train, test and sample submission (the last two None when not given)."""
    train = read_csv(req.train, "The training file")
    test = read_csv(req.test, "The test file") if req.test is not None else None
    sample = read_csv(req.sample, "The sample submission") if req.sample is not None else None
    if test is None and req.holdout is None:
        raise NewTaskError("Give a test file (--test) or carve one from train with --holdout F.")
    report.say("train", f"{req.train.name}: {len(train):,} rows × {train.shape[1]} columns")
    for name, frame in ((req.train, train), (req.test, test), (req.sample, sample)):
        sep = frame.attrs.get("separator") if frame is not None else None
        if sep and name is not None:
            report.say("read", f"{name.name}: fields separated by {SEPARATOR_WORDS[sep]} ({sep!r})")
    return train, test, sample


def _infer_columns(
    train: Any, test: Any, sample: Any, req: NewTaskRequest, report: NewTaskReport
) -> tuple[Any, bool]:
    """The id column, the targets and the classes (on the report); returns train without its unlabelled
    rows, and whether the id column is to be made up (no file has one)."""
    id_column, made_id = infer_id(train, test, sample, req.id_column, report)
    targets, classes = infer_targets(
        train, test, sample, None if made_id else id_column, req.target, report
    )
    if id_column in targets:
        raise NewTaskError(f"The id column {id_column!r} cannot also be the target.")
    for t in targets:
        if train[t].isna().all():
            raise NewTaskError(f"The target column {t!r} is missing in every row of train.csv.")
    check_finite_target(train, targets, req.train.name)
    unlabelled = train[targets].isna().any(axis=1)
    if unlabelled.any():
        train = train[~unlabelled].reset_index(drop=True)
        report.say(
            "rows", f"{int(unlabelled.sum()):,} training rows without a target value dropped"
        )
    report.id_column = id_column
    report.target = targets
    report.classes = classes
    return train, made_id


def _line_up_ids(train: Any, test: Any, made_id: bool, report: NewTaskReport) -> tuple[Any, Any]:
    """Ids made up, or checked unique (a test file may carry the id column that train lacks); test's
    columns checked to be train's without the target, and put in train's order."""
    id_column, targets = report.id_column, report.target
    if made_id:
        train.insert(0, id_column, range(len(train)))
        if test is not None:
            test.insert(0, id_column, range(len(train), len(train) + len(test)))
    elif id_column not in train.columns:
        train.insert(0, id_column, range(-len(train), 0))
        report.say(
            "id", f"{id_column} is in test.csv only: training rows get ids -{len(train)}..-1"
        )
    check_unique(train, id_column, "train.csv")
    if test is None:
        return train, test
    if id_column not in test.columns:
        raise NewTaskError(f"test.csv has no id column {id_column!r}.")
    check_unique(test, id_column, "test.csv")
    expected = [c for c in train.columns if c not in targets]
    missing = [c for c in expected if c not in test.columns]
    extra = [c for c in test.columns if c not in expected]
    if missing or extra:
        parts = ([f"lacks {', '.join(map(repr, missing))}"] if missing else []) + (
            [f"has {', '.join(map(repr, extra))} that train.csv has not"] if extra else []
        )
        raise NewTaskError(
            f"test.csv's columns differ from train.csv's without the target: it "
            f"{' and '.join(parts)}."
        )
    return train, test[expected]


def _infer_task_type(
    y: Any, sample_values: Any, req: NewTaskRequest, report: NewTaskReport
) -> set[str]:
    """The task type (on the report), checked against the targets; returns the class labels seen (none
    for regression)."""
    task_type, why = infer_task_type(y, sample_values, req.task_type)
    if req.task_type and req.task_type not in METRICS_FOR:
        raise NewTaskError(f"--task-type must be one of {', '.join(METRICS_FOR)}.")
    labels = (
        set(y.iloc[:, 0].dropna().astype(str)) if task_type.endswith("classification") else set()
    )
    if report.classes and task_type not in ("binary-classification", "multiclass-classification"):
        raise NewTaskError(
            "sample_submission.csv has one column per class, but the target is not a class label."
        )
    if (
        task_type == "binary-classification"
        and len(report.target) == 1
        and y.iloc[:, 0].nunique() != 2
    ):
        raise NewTaskError(
            f"A binary task needs exactly 2 labels; {report.target[0]!r} has {y.iloc[:, 0].nunique()}."
        )
    report.say("task type", f"{task_type} ({why})")
    report.task_type = task_type
    return labels


def _choose_metric(
    y: Any, sample_values: Any, labels: set[str], req: NewTaskRequest, report: NewTaskReport
) -> Any:
    """The metric (--metric, or the task type's default) and the classes it needs, on the report; returns
    the positive label for AUROC on one target (else None)."""
    task_type, classes = report.task_type, report.classes
    if req.metric:
        try:
            metric = get_metric(req.metric).name
        except KeyError as exc:
            raise NewTaskError(
                f"Unknown metric {req.metric!r}; known: {', '.join(sorted(METRIC_WORDS))}."
            ) from exc
        metric_why = "from --metric"
    else:
        metric, metric_why = default_metric(
            task_type, len(report.target), classes, sample_values, labels
        )
    check_metric(metric, task_type, y)
    if metric == "logloss" and not classes:
        classes = sorted(labels)
    positive: Any = None
    if metric == "auroc" and len(report.target) == 1:
        values = sorted(y.iloc[:, 0].dropna().unique().tolist(), key=str)
        positive = values[-1]
        if not is_number(y.iloc[:, 0]):
            classes = [str(v) for v in values]  # the grader reads classes[-1] as the positive label
    better = "higher is better" if get_metric(metric).direction == "maximize" else "lower is better"
    report.say("metric", f"{metric}, {better} ({metric_why})")
    report.metric, report.classes = metric, classes
    return positive


def _infer_modality(train: Any, req: NewTaskRequest, report: NewTaskReport) -> None:
    """Text (with its text column) or tabular, on the report."""
    features = [c for c in train.columns if c not in report.target and c != report.id_column]
    report.text_column = infer_modality(train, features, req.text_column, report)
    report.modality = "text" if report.text_column else "tabular"


def _test_rows(
    train: Any, test: Any, sample: Any, req: NewTaskRequest, report: NewTaskReport
) -> tuple[Any, Any, Any]:
    """(train, test, answers): the user's test rows in sample_submission's order (answers None), or a
    labelled hold-out carved from train."""
    answers = None
    id_column = report.id_column
    if req.holdout is not None:
        train, test, answers = _carve(
            train, report.target, report.task_type, req.holdout, req.seed, report
        )
        if req.test is not None:
            report.say("test", f"{req.test.name} is not used: the hold-out is the test set")
        report.has_answers = True
    elif sample is not None:
        if id_column not in sample.columns:
            raise NewTaskError(f"sample_submission.csv has no id column {id_column!r}.")
        check_unique(sample, id_column, "sample_submission.csv")
        assert test is not None
        if set(sample[id_column].astype(str)) != set(test[id_column].astype(str)):
            raise NewTaskError("sample_submission.csv's ids differ from test.csv's.")
        order = {v: i for i, v in enumerate(sample[id_column].astype(str))}
        test = test.iloc[test[id_column].astype(str).map(order).argsort()].reset_index(drop=True)
    assert test is not None
    judged = (
        " with held-out answers"
        if answers is not None
        else (" without answers: no test score; rows held back from train judge the runs")
    )
    report.say("test", f"{len(test):,} rows{judged}")
    return train, test, answers


def _sample_submission(report: NewTaskReport, y: Any, test: Any, sample: Any, answers: Any) -> Any:
    """The user's sample submission, unless there is none or the test rows are a hold-out (it does not
    list them): then one with a constant guess for every test row."""
    import pandas as pd

    columns = report.classes if report.metric == "logloss" else report.target
    if sample is not None and answers is None:
        return sample[[report.id_column, *columns]]
    fill = _placeholder(report, y)
    return pd.DataFrame(
        {report.id_column: test[report.id_column].to_numpy(), **{c: fill[c] for c in columns}}
    )


def _placeholder(report: NewTaskReport, y: Any) -> dict[str, Any]:
    """Values for a made sample_submission: what a constant guess would upload."""
    if report.metric == "logloss":
        return {c: round(1 / len(report.classes), 6) for c in report.classes}
    if report.metric == "auroc":
        return {t: 0.5 for t in report.target}
    if report.metric == "accuracy":
        return {report.target[0]: y.iloc[:, 0].mode().sort_values().iloc[0]}
    return {t: float(y[t].median()) for t in report.target}


def declared_sources(req: NewTaskRequest) -> tuple[str, ...]:
    """The package data the files were built from: the request's own, or the sources.txt beside the
    training file (a folder made by `cbr tasks kaggle-example` has one), so that the sandbox hides it."""
    sources = req.sources or folder_sources(req.train.parent)
    where = "sources" if req.sources else str(req.train.parent / SOURCES_FILE)
    for entry in sources:
        problem = entry_problem(entry)
        if problem:
            raise NewTaskError(f"The entry {entry!r} of {where} {problem}.")
    return sources


def _carve(
    train: Any,
    targets: list[str],
    task_type: str,
    fraction: float,
    seed: int,
    report: NewTaskReport,
) -> tuple[Any, Any, Any]:
    """A seeded hold-out (stratified for single-label classification) as the test file and its answers."""
    from sklearn.model_selection import train_test_split

    stratify = None
    if task_type in ("binary-classification", "multiclass-classification"):
        counts = train[targets[0]].value_counts()
        if counts.min() >= 2 and round(fraction * len(train)) >= len(counts):
            stratify = train[targets[0]]
    keep, held = train_test_split(train, test_size=fraction, random_state=seed, stratify=stratify)
    how = "stratified by " + targets[0] if stratify is not None else "random"
    report.say(
        "hold-out",
        f"{len(held):,} labelled rows ({fraction:g}, seed {seed}, {how}) moved from train "
        "to the test file; their answers go to private/answers.csv",
    )
    held = disguised(held, report.id_column)
    return (
        keep.reset_index(drop=True),
        held.drop(columns=targets),
        held[[report.id_column, *targets]],
    )


def disguised(rows: Any, id_column: str) -> Any:
    """Hold-out rows in an order, and with ids, that say nothing of where they stood: in a file sorted by
    its label, a test row known by its id (missing from train.csv) has its label on its neighbours. Their
    ids are dealt out among them at random, from the system's randomness rather than the seed: the seed
    is the user's (0 unless they gave one), so a script could redo a draw made with it."""
    import numpy as np

    rng = np.random.default_rng(secrets.randbits(64))
    rows = rows.iloc[rng.permutation(len(rows))].reset_index(drop=True)
    return rows.assign(**{id_column: rows[id_column].to_numpy()[rng.permutation(len(rows))]})
