"""Task layouts whose files' order carries the label, for the tests that rows tell nothing: a training
file sorted by its label, and a drifting series in time order with no declared time column, each as a
Kaggle folder, `--train/--test` files, a `--holdout` split and a DS-Agent folder; and arrays sorted by
label. Large enough (500 selection rows) that a guess at chance is told from one that is not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dsagent_cbr.tasks.create import NewTaskRequest, create_task
from dsagent_cbr.tasks.export import export_dsagent
from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.model import Task
from support.layouts import _NPY_STARTER

ROWS, TEST_ROWS = 2500, 500


def labelled(kind: str, rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Rows whose order carries the label: sorted by a class, or a drifting series in time order."""
    x = rng.normal(size=(n, 3)).round(4)
    frame = pd.DataFrame(x, columns=["x1", "x2", "x3"])
    if kind == "sorted":
        frame["kind"] = np.where(rng.random(n) < 0.5, "tall", "short")
        return frame.sort_values("kind", kind="stable").reset_index(drop=True)
    frame["level"] = (np.arange(n) / 25 + rng.normal(size=n)).round(3)  # drifts with the row's place
    frame["day"] = pd.date_range("2020-01-01", periods=n, freq="h").strftime("%Y-%m-%d %H:00")
    return frame


def _target(kind: str) -> str:
    return "kind" if kind == "sorted" else "level"


def kaggle_task(root: Path, kind: str, sample: bool) -> Task:
    """A Kaggle-shaped folder: train.csv in the order that carries the label, ids by place; test rows of
    the same source with ids of their own block."""
    rng = np.random.default_rng(11)
    train, test = labelled(kind, rng, ROWS), labelled(kind, rng, TEST_ROWS).sample(frac=1, random_state=3)
    train.insert(0, "id", np.arange(ROWS))
    test = test.drop(columns=[_target(kind)]).reset_index(drop=True)
    test.insert(0, "id", np.arange(ROWS, ROWS + TEST_ROWS))
    folder = root / f"{kind}-{sample}-files"
    folder.mkdir(parents=True)
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    given = None
    if sample:
        fill = "short" if kind == "sorted" else 0.0
        pd.DataFrame({"id": test["id"], _target(kind): fill}).to_csv(folder / "sample.csv", index=False)
        given = folder / "sample.csv"
    dest = root / f"{kind}-{'kaggle' if sample else 'train-test'}"
    create_task(NewTaskRequest(dest=dest, train=folder / "train.csv", test=folder / "test.csv", sample=given,
                               target=(_target(kind),), metric=_metric(kind)))
    return load_task(dest)


def with_details(task: Task) -> Task:
    """The task with a second public file of more columns by id, for every row, in the ids' order (a
    competition's table of extra features): its places follow the training file's order too."""
    train, test = (pd.read_csv(task.public_dir / n) for n in ("train.csv", "test.csv"))
    rows = pd.concat([train[["id"]], test[["id"]]]).sort_values("id")
    rows.assign(x4=np.arange(len(rows)) % 7).to_csv(task.public_dir / "details.csv", index=False)
    toml = task.root / "task.toml"
    toml.write_text(toml.read_text().replace('"sample_submission.csv"]', '"sample_submission.csv", "details.csv"]'))
    return load_task(task.root)


def holdout_task(root: Path, kind: str) -> Task:
    """`--holdout` on one file in the order that carries the label, with no id column (cbr makes one)."""
    source = root / f"{kind}-all.csv"
    labelled(kind, np.random.default_rng(12), ROWS + TEST_ROWS).to_csv(source, index=False)
    dest = root / f"{kind}-holdout"
    create_task(NewTaskRequest(dest=dest, train=source, target=(_target(kind),), metric=_metric(kind),
                               holdout=TEST_ROWS / (ROWS + TEST_ROWS)))
    return load_task(dest)


def _npy(root: Path) -> Task:
    """Arrays of labelled series, sorted by label."""
    rng = np.random.default_rng(13)
    folder = root / "sorted-npy"
    (folder / "data").mkdir(parents=True)
    (folder / "private").mkdir()
    y = np.sort(rng.choice(["run", "walk"], ROWS))
    for name, array in (("X_train", rng.normal(size=(ROWS, 2, 8))), ("y_train", y),
                        ("X_test", rng.normal(size=(TEST_ROWS, 2, 8)))):
        np.save(folder / "data" / f"{name}.npy", array)
    np.save(folder / "private" / "y_test.npy", rng.choice(["run", "walk"], TEST_ROWS))
    (folder / "task.toml").write_text(
        'name = "sorted-npy"\nmodality = "time-series-classification"\ntask_type = "binary-classification"\n'
        'metric = "accuracy"\nstage = "development"\n\n[data]\nformat = "npy"\n'
        'public = ["X_train.npy", "y_train.npy", "X_test.npy"]\nanswers = "y_test.npy"\n'
        'predictions = "predictions.npy"\n')
    (folder / "description.md").write_text("Arrays sorted by label.\n")
    (folder / "train.py").write_text(_NPY_STARTER)
    return load_task(folder)


def _metric(kind: str) -> str:
    return "accuracy" if kind == "sorted" else "rmse"


def every_ordered_layout(root: Path) -> dict[str, Task]:
    """Each layout of each kind of file, by name (LAYOUTS)."""
    tasks: dict[str, Task] = {}
    for kind in ("sorted", "time-ordered"):
        tasks[f"{kind}-kaggle"] = kaggle_task(root, kind, sample=True)
        tasks[f"{kind}-train-test"] = kaggle_task(root, kind, sample=False)
        tasks[f"{kind}-holdout"] = holdout_task(root, kind)
        tasks[f"{kind}-dsagent"] = load_task(export_dsagent(tasks[f"{kind}-holdout"], root / f"{kind}-dsagent"))
    tasks["sorted-npy"] = _npy(root)
    tasks["sorted-kaggle-details"] = with_details(kaggle_task(root / "details", "sorted", sample=True))
    return tasks


LAYOUTS = [f"{kind}-{layout}" for kind in ("sorted", "time-ordered")
           for layout in ("kaggle", "train-test", "holdout", "dsagent")] + ["sorted-npy", "sorted-kaggle-details"]
