"""Every task layout a script's workspace is built for, made small and offline in a few seconds: Kaggle
folders with a sample submission of each kind, `--holdout` tasks (with a group or a time column), a
file that labels rows by id beside the training file, arrays for classification and forecasting, and
DS-Agent folders (one- and two-argument submit, csv and arrays)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from dsagent_cbr.tasks.create import NewTaskRequest, create_task
from dsagent_cbr.tasks.export import export_dsagent
from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.model import Task

ROWS, TEST_ROWS = 300, 80


def _table(rng: np.random.Generator, n: int, start: int) -> pd.DataFrame:
    return pd.DataFrame({"id": np.arange(start, start + n), "x1": rng.normal(size=n).round(4),
                         "x2": rng.uniform(0, 10, n).round(3), "colour": rng.choice(["red", "green", "blue"], n)})


def _kaggle(root: Path, name: str, targets: dict[str, Callable[[pd.DataFrame], np.ndarray]],
            sample: Callable[[pd.DataFrame], pd.DataFrame]) -> Path:
    """A Kaggle-shaped folder (train, test, sample submission) made into a task by `cbr tasks new`."""
    rng = np.random.default_rng(len(name))
    train, test = _table(rng, ROWS, 0), _table(rng, TEST_ROWS, 10_000)
    for column, make in targets.items():
        train[column] = make(train)
    folder = root / f"{name}-input"
    folder.mkdir(parents=True)
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    sample(test).to_csv(folder / "sample_submission.csv", index=False)
    create_task(NewTaskRequest(dest=root / name, train=folder / "train.csv", test=folder / "test.csv",
                               sample=folder / "sample_submission.csv"))
    return root / name


def _holdout(root: Path, name: str, data: dict[str, str] | None = None) -> Path:
    """A labelled table split by `--holdout`, its task.toml given extra [data] keys."""
    rng = np.random.default_rng(7)
    train = _table(rng, ROWS + TEST_ROWS, 0)
    train["team"] = rng.choice([f"t{k}" for k in range(12)], len(train))
    train["day"] = pd.date_range("2024-01-01", periods=len(train), freq="D").strftime("%Y-%m-%d")
    train["churned"] = np.where(train["x1"] + rng.normal(size=len(train)) > 0, "yes", "no")
    train.to_csv(root / f"{name}.csv", index=False)
    create_task(NewTaskRequest(dest=root / name, train=root / f"{name}.csv", target=("churned",), holdout=0.2))
    if data:
        toml = root / name / "task.toml"
        lines = [f'{k} = "{v}"' for k, v in data.items()]
        toml.write_text(toml.read_text().replace("[data]\n", "[data]\n" + "\n".join(lines) + "\n"))
    return root / name


def _with_labelled_extra(task_dir: Path) -> Path:
    """A second public csv that labels the training rows by id, as a competition's "original data" does."""
    train = pd.read_csv(task_dir / "data" / "train.csv")
    train[["id", "price"]].to_csv(task_dir / "data" / "extra_labels.csv", index=False)
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text().replace('"sample_submission.csv"]', '"sample_submission.csv", "extra_labels.csv"]'))
    return task_dir


def _npy(root: Path, name: str, forecasting: bool) -> Path:
    """A task of arrays: windows of a series to forecast, or labelled multichannel series."""
    rng = np.random.default_rng(3)
    folder = root / name
    (folder / "data").mkdir(parents=True)
    (folder / "private").mkdir()
    if forecasting:
        series = np.sin(np.arange(600) / 9) * 10 + rng.normal(size=600)
        X = np.stack([series[i:i + 24] for i in range(0, 480, 3)])
        y = np.stack([series[i + 24:i + 30] for i in range(0, 480, 3)])
        X_test, y_test = series[None, 520:544], series[None, 544:550]
        head = 'modality = "forecasting"\ntask_type = "forecasting"\nmetric = "mse"\n'
    else:
        X, X_test = rng.normal(size=(ROWS, 3, 20)), rng.normal(size=(TEST_ROWS, 3, 20))
        y, y_test = rng.choice(["walk", "run", "sit"], ROWS), rng.choice(["walk", "run", "sit"], TEST_ROWS)
        head = 'modality = "time-series-classification"\ntask_type = "multiclass-classification"\nmetric = "accuracy"\n'
    for file, array in (("X_train", X), ("y_train", y), ("X_test", X_test)):
        np.save(folder / "data" / f"{file}.npy", array)
    np.save(folder / "private" / "y_test.npy", y_test)
    (folder / "task.toml").write_text(
        f'name = "{name}"\n{head}stage = "development"\n\n[data]\nformat = "npy"\n'
        'public = ["X_train.npy", "y_train.npy", "X_test.npy"]\nanswers = "y_test.npy"\npredictions = "predictions.npy"\n')
    (folder / "description.md").write_text(f"{name}: a small task of arrays.\n")
    (folder / "train.py").write_text(_NPY_STARTER)
    return folder


_NPY_STARTER = '''import numpy as np

def train_model(X_train, y_train, X_valid, y_valid):
    return y_train


def predict(model, X):
    return np.repeat(model[:1], len(X), axis=0)


if __name__ == "__main__":
    X, y = np.load("X_train.npy"), np.load("y_train.npy")
    model = train_model(X, y, X, y)
    np.save("predictions.npy", predict(model, np.load("X_test.npy")))
'''


def _mean(column: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    return lambda test: pd.DataFrame({"id": test["id"], column: 0.0})


PRICE = {"price": lambda t: (t["x1"] * 3 + t["x2"] + np.where(t["colour"] == "red", 5, 0)).round(3)}


def kaggle_sample_task(root: Path) -> Task:
    """A Kaggle folder made a task, whose sample submission guesses one price for every test id."""
    return load_task(_kaggle(root, "kaggle-sample-regression", PRICE, _mean("price")))


def every_layout(root: Path) -> dict[str, Task]:
    """Each layout once, by name."""
    price = PRICE
    made = {
        "kaggle-sample-regression": _kaggle(root, "kaggle-sample-regression", price, _mean("price")),
        "kaggle-sample-probability": _kaggle(
            root, "kaggle-sample-probability", {"bought": lambda t: (t["x1"] > 0).astype(int)},
            lambda test: pd.DataFrame({"id": test["id"], "bought": 0.5})),
        "kaggle-sample-labels": _kaggle(
            root, "kaggle-sample-labels", {"kind": lambda t: np.where(t["x2"] > 5, "tall", "short")},
            lambda test: pd.DataFrame({"id": test["id"], "kind": "short"})),
        "kaggle-probability-columns": _kaggle(
            root, "kaggle-probability-columns", {"shade": lambda t: t["colour"].str.upper()},
            lambda test: pd.DataFrame({"id": test["id"], "BLUE": 1 / 3, "GREEN": 1 / 3, "RED": 1 / 3})),
        "kaggle-several-targets": _kaggle(
            root, "kaggle-several-targets", {"a": lambda t: t["x1"].round(2), "b": lambda t: (t["x2"] * 2).round(2)},
            lambda test: pd.DataFrame({"id": test["id"], "a": 0.0, "b": 0.0})),
        "holdout": _holdout(root, "holdout"),
        "holdout-groups": _holdout(root, "holdout-groups", {"group_column": "team"}),
        "holdout-time": _holdout(root, "holdout-time", {"time_column": "day"}),
        "npy-classification": _npy(root, "npy-classification", forecasting=False),
        "npy-forecasting": _npy(root, "npy-forecasting", forecasting=True),
    }
    made["labelled-extra-file"] = _with_labelled_extra(_kaggle(root, "labelled-extra-file", price, _mean("price")))
    tasks = {name: load_task(folder) for name, folder in made.items()}
    for name in ("holdout", "npy-classification", "npy-forecasting"):
        tasks[f"dsagent-{name}"] = load_task(export_dsagent(tasks[name], root / f"dsagent-{name}"))
    return tasks


def target_columns(task: Task) -> tuple[str, ...]:
    """The columns that hold a csv task's labels (its DS-Agent label columns, in that layout)."""
    return task.dsagent.label_columns if task.dsagent is not None else task.target
