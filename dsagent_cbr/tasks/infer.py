"""What a user's table is, read from train.csv, test.csv and sample_submission.csv: the target column(s),
the task type, a default metric, the modality (is one column free text?) and the id column. Each guess
is written to the report with its reason, and what cannot be told is one sentence (NewTaskError)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.errors import CbrError

# Which metrics fit which task type; the first is the default (binary and multi-class defaults are
# refined by what sample_submission holds).
METRICS_FOR = {
    "regression": ("rmse", "mse", "mae", "medae", "rmsle", "mcrmse"),
    "binary-classification": ("auroc", "accuracy", "logloss"),
    "multiclass-classification": ("accuracy", "logloss"),
    "multilabel-classification": ("auroc",),
}
MAX_LABELS = 10  # an integer target with at most this many values reads as classes
TEXT_MIN_CHARS, TEXT_MIN_WORDS = 30, 5


class NewTaskError(CbrError):
    """Input that cannot become a task; the message is one sentence saying why."""


@dataclass
class NewTaskReport:
    """What was inferred, each with the reason, in the order it is printed."""

    dest: Path
    modality: str = ""
    task_type: str = ""
    metric: str = ""
    target: list[str] = field(default_factory=list)
    id_column: str = ""
    text_column: str | None = None
    classes: list[str] = field(default_factory=list)
    has_answers: bool = False
    lines: list[tuple[str, str]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def say(self, key: str, text: str) -> None:
        self.lines.append((key, text))


SHOWN_COLUMNS = 30  # a wider table's columns are named up to this many


def no_such_column(said: str, name: str, columns: Any) -> NewTaskError:
    """`said` (a column is not there) as one sentence with the nearest column's name, when one is
    close (a misspelling), and the columns there are."""
    import difflib

    names = [str(c) for c in columns]
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if not near:  # a name in another case ("Had_Affair") is as near as names come
        near = [c for c in names if c.lower() == name.lower()][:1]
    guess = f" (did you mean {near[0]}?)" if near else ""
    listed = ", ".join(names[:SHOWN_COLUMNS])
    more = f" and {len(names) - SHOWN_COLUMNS} more" if len(names) > SHOWN_COLUMNS else ""
    return NewTaskError(f"{said}{guess}; train.csv's columns are {listed}{more}.")


def is_number(values: Any) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)


def _integral(values: Any) -> bool:
    import numpy as np

    v = values.dropna().to_numpy(dtype=float)
    return bool(np.all(np.isfinite(v)) and np.all(v == np.round(v)))


def check_finite_target(train: Any, targets: list[str], where: str) -> None:
    """A numeric target holds no inf or -inf (pandas reads a number past float64's range, like 1e999, as
    inf): no metric can score a prediction of it, and the task would be made only to fail its runs."""
    import numpy as np

    for t in (t for t in targets if is_number(train[t])):
        infinite = int(np.isinf(train[t].to_numpy(dtype=float, na_value=np.nan)).sum())
        if infinite:
            raise NewTaskError(
                f"The target column {t!r} of {where} holds {infinite:,} infinite value(s) (inf, "
                "-inf, or a number too large for float64 such as 1e999); a target must be finite."
            )


def _is_label_like(value: Any, labels: set[str]) -> bool:
    return str(value) in labels


def infer_targets(
    train: Any,
    test: Any | None,
    sample: Any | None,
    id_column: str | None,
    given: tuple[str, ...],
    report: NewTaskReport,
) -> tuple[list[str], list[str]]:
    """(target columns in train, logloss classes) from the flags, sample_submission or the test file."""
    columns = list(train.columns)
    if given:
        missing = [t for t in given if t not in columns]
        if missing:
            said = f"train.csv has no target column {', '.join(map(repr, missing))}"
            raise no_such_column(said, missing[0], columns)
        report.say("target", f"{', '.join(given)} (from --target)")
        return list(given), []
    if sample is not None:
        wanted = [c for c in sample.columns if c != id_column]
        if not wanted:
            raise NewTaskError(
                "sample_submission.csv has no column besides the id to tell the target."
            )
        if all(c in columns for c in wanted):
            report.say(
                "target", f"{', '.join(wanted)} (sample_submission.csv's columns besides the id)"
            )
            return wanted, []
        # One probability column per class of a single label column (log loss, e.g. Class_1..Class_9).
        test_cols = set(test.columns) if test is not None else set()
        for c in columns:
            if c in test_cols or c == id_column:
                continue
            labels = set(train[c].dropna().astype(str))
            if labels and labels == {str(w) for w in wanted}:
                report.say("target", f"{c} (sample_submission.csv has one column per class of {c})")
                return [c], [str(w) for w in wanted]
        absent = [c for c in wanted if c not in columns]
        raise NewTaskError(
            f"train.csv lacks the target column(s) {', '.join(map(repr, absent))} that "
            "sample_submission.csv names."
        )
    if test is not None:
        extra = [c for c in columns if c not in set(test.columns) and c != id_column]
        if extra:
            report.say(
                "target", f"{', '.join(extra)} (the column(s) of train.csv that test.csv lacks)"
            )
            return extra, []
    raise NewTaskError(
        "Cannot tell the target column: give --target COL (or a sample_submission.csv)."
    )


def infer_task_type(y: Any, sample_values: Any | None, given: str | None) -> tuple[str, str]:
    """(task type, reason) for the target frame y (one column per target)."""
    if given:
        return given, "from --task-type"
    if y.shape[1] > 1:
        if all(is_number(y[c]) and set(y[c].dropna().unique()) <= {0, 1} for c in y.columns):
            return "multilabel-classification", f"{y.shape[1]} target columns, all 0/1"
        if all(is_number(y[c]) for c in y.columns):
            return "regression", f"{y.shape[1]} numeric target columns"
        raise NewTaskError(
            "Several target columns must all be numeric (multi-target regression) or all 0/1 "
            "(multi-label classification)."
        )
    col = y.iloc[:, 0]
    n = int(col.nunique())
    if n < 2:
        raise NewTaskError(
            f"The target {col.name!r} has a single value in train.csv: there is nothing to learn."
        )
    if not is_number(col):
        kind = "binary-classification" if n == 2 else "multiclass-classification"
        return kind, f"{n} distinct labels"
    fractional = (
        sample_values is not None and is_number(sample_values) and not _integral(sample_values)
    )
    if _integral(col) and n == 2:
        return (
            "binary-classification",
            f"2 distinct values ({', '.join(map(str, sorted(col.dropna().unique())))})",
        )
    if _integral(col) and n <= MAX_LABELS and not fractional:
        return "multiclass-classification", (
            f"{n} distinct integer values (use --task-type regression if they are amounts)"
        )
    return "regression", f"numeric with {n:,} distinct values"


def default_metric(
    task_type: str, n_targets: int, classes: list[str], sample_values: Any | None, labels: set[str]
) -> tuple[str, str]:
    if task_type == "regression":
        return (
            ("mcrmse", "default for several numeric targets")
            if n_targets > 1
            else ("rmse", "default for regression")
        )
    if task_type == "multilabel-classification":
        return "auroc", "default for multi-label classification"
    if classes:
        return "logloss", "sample_submission.csv has one probability column per class"
    if task_type == "multiclass-classification":
        return "accuracy", "default for multi-class classification"
    return _binary_metric(sample_values, labels)


def _binary_metric(sample_values: Any | None, labels: set[str]) -> tuple[str, str]:
    """A binary target's metric, from what the sample submission holds. One label in every row is a
    placeholder, not a choice of labels (Kaggle's samples are mostly so): 0/1 targets are then scored by
    AUROC, as most such competitions are; named labels (True/False) by accuracy, as Spaceship Titanic is."""
    if sample_values is None:
        return "auroc", "default for binary classification"
    seen = sample_values.dropna().unique()
    if not all(_is_label_like(v, labels) for v in seen):
        return (
            "auroc",
            "default for binary classification; sample_submission.csv holds probabilities",
        )
    change = "; check the competition's evaluation, and pass --metric {} if it scores {}"
    if len(seen) > 1:
        return "accuracy", "sample_submission.csv holds labels" + change.format(
            "auroc", "probabilities"
        )
    if all(_is_number_text(v) for v in labels):
        return "auroc", (
            f"sample_submission.csv holds one value ({_first(seen)}) for every row: a placeholder, so "
            "the submission holds probabilities of the positive class"
            + change.format("accuracy", "labels")
        )
    return "accuracy", (
        f"sample_submission.csv holds one label ({_first(seen)}) for every row: a placeholder, and "
        "the labels are names, so the submission holds labels"
        + change.format("auroc", "probabilities")
    )


def _is_number_text(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _first(values: Any) -> str:
    return str(values[0]) if len(values) else "nothing"


def check_metric(metric: str, task_type: str, y: Any) -> None:
    if metric not in METRICS_FOR[task_type]:
        fits = ", ".join(METRICS_FOR[task_type])
        raise NewTaskError(
            f"The metric {metric} does not fit a {task_type} task (use one of: {fits})."
        )
    if metric == "rmsle" and bool((y.to_numpy(dtype=float) < 0).any()):
        raise NewTaskError(
            "The metric rmsle needs non-negative targets, and train.csv has negative ones."
        )


def free_text_columns(frame: Any, columns: list[str]) -> list[tuple[str, float]]:
    """(column, mean characters) of the columns that hold free text, longest first."""
    import pandas as pd

    found = []
    for c in columns:
        values = frame[c].dropna()
        if values.empty or not (
            pd.api.types.is_string_dtype(values) or pd.api.types.is_object_dtype(values)
        ):
            continue
        values = values.astype(str).iloc[:50_000]
        chars, words = float(values.str.len().mean()), float(values.str.split().str.len().mean())
        if (
            chars >= TEXT_MIN_CHARS
            and words >= TEXT_MIN_WORDS
            and values.nunique() >= 0.5 * len(values)
        ):
            found.append((c, chars))
    return sorted(found, key=lambda p: -p[1])


def infer_modality(
    train: Any, features: list[str], given: str | None, report: NewTaskReport
) -> str | None:
    if given:
        if given not in features:
            raise NewTaskError(f"--text-column {given!r} is not a feature column of train.csv.")
        report.say("modality", f"text (from --text-column {given})")
        return given
    texts = free_text_columns(train, features)
    # a text task's starter hands its scripts the text alone: only a table of nothing else is one, so that
    # columns beside the text are learnt from (the tabular drafts take free text as TF-IDF features)
    if texts and len(features) == 1:
        name, chars = texts[0]
        report.say("modality", f"text: `{name}` is free text (mean {chars:.0f} characters)")
        return name
    if texts:
        report.say(
            "modality",
            f"tabular: free text in {', '.join(t for t, _ in texts)} is learnt beside the other "
            f"{len(features) - len(texts)} feature column(s) (--text-column makes it a text task on that "
            "column alone)",
        )
    else:
        report.say("modality", f"tabular ({len(features)} feature columns, no free text)")
    return None


_ID_HINTS = ("id",)


def _looks_like_id(name: str) -> bool:
    low = name.lower()
    return low in _ID_HINTS or low.endswith("_id") or name.endswith(("Id", "ID"))


def infer_id(
    train: Any, test: Any | None, sample: Any | None, given: str | None, report: NewTaskReport
) -> tuple[str, bool]:
    """(id column, whether it must be made up)."""
    if given:
        where = [
            n
            for n, f in (("train.csv", train), ("test.csv", test))
            if f is not None and given in f.columns
        ]
        if not where:
            said = f"The id column {given!r} is in neither train.csv nor test.csv"
            raise no_such_column(said, given, train.columns)
        report.say("id", f"{given} (from --id)")
        return given, False
    if sample is not None:
        report.say("id", f"{sample.columns[0]} (sample_submission.csv's first column)")
        return str(sample.columns[0]), False
    for c in train.columns:
        if _looks_like_id(str(c)) and (test is None or c in test.columns) and train[c].is_unique:
            report.say("id", f"{c} (named like an id, unique)")
            return str(c), False
    for c in test.columns if test is not None else []:
        if _looks_like_id(str(c)) and c not in train.columns and test[c].is_unique:
            report.say("id", f"{c} (named like an id, unique, in test.csv only)")
            return str(c), False
    name = "id" if "id" not in train.columns else "row_id"
    report.say("id", f"{name} (made up: row numbers, train first, then test)")
    return name, True


def check_unique(frame: Any, column: str, what: str) -> None:
    if column not in frame.columns:
        return
    if frame[column].isna().any():
        raise NewTaskError(f"The id column {column!r} of {what} has missing values.")
    if not frame[column].is_unique:
        dup = frame[column][frame[column].duplicated()].iloc[0]
        raise NewTaskError(
            f"The id column {column!r} of {what} is not unique (e.g. {dup!r} repeats)."
        )
