"""Time-series classification archives (UCR/UEA .ts files) bundled inside sktime and aeon."""

import importlib.util
import io
from pathlib import Path

import numpy as np

from dsagent_cbr.files import write_bytes_atomic


def dataset_dir(package: str, dataset: str) -> Path:
    """The archive folder inside the installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            f"{package} is not installed; it ships the {dataset} files this task is built from"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / dataset


def read_ts(path: Path) -> tuple[list[list[np.ndarray]], list[str]]:
    """Each case as a list of per-channel arrays, and its label. In a .ts file the header lines start
    with '@' or '#', and after '@data' each line holds the channels separated by ':' (values by ','),
    with the class label last; '?' marks a missing value."""
    cases, labels = [], []
    in_data = False
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            in_data = line.lower().startswith("@data")
            continue
        *channels, label = line.split(":")
        cases.append(
            [np.array([np.nan if v == "?" else float(v) for v in ch.split(",")]) for ch in channels]
        )
        labels.append(label.strip())
    if not cases:
        raise SystemExit(f"{path} holds no cases")
    return cases, labels


def stack(cases: list[list[np.ndarray]], length: int) -> np.ndarray:
    out = np.full((len(cases), len(cases[0]), length), np.nan)
    for i, case in enumerate(cases):
        for j, channel in enumerate(case):
            out[i, j, : len(channel)] = channel
    return out


def label_array(labels: list[str]) -> np.ndarray:
    """Integer labels when every label is an integer, else strings (never an object array)."""
    try:
        return np.array([int(v) for v in labels], dtype=np.int64)
    except ValueError:
        return np.array(labels, dtype=str)


def shuffled(cases: list, labels: list[str], seed: int) -> tuple[list, list[str]]:
    order = np.random.default_rng(seed).permutation(len(cases))
    return [cases[i] for i in order], [labels[i] for i in order]


def save(path: Path, array: np.ndarray) -> None:
    # Whole or not at all, so an interrupted run never leaves a truncated array behind.
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    write_bytes_atomic(path, buffer.getvalue())


def build_from_archive(here: Path, package: str, dataset: str) -> None:
    """data/ and private/ for a UCR/UEA archive task. The archive's own TRAIN/TEST split is kept: TRAIN
    becomes the public training set, TEST the cases to predict, whose labels go to private/. Cases are
    stacked as (cases, channels, length); series shorter than the longest (over both splits) are padded
    with NaN at the end. Each split is shuffled with a fixed seed, since archive files list the cases
    grouped by class."""
    folder = dataset_dir(package, dataset)
    train, y_train = shuffled(*read_ts(folder / f"{dataset}_TRAIN.ts"), seed=0)
    test, y_test = shuffled(*read_ts(folder / f"{dataset}_TEST.ts"), seed=1)
    length = max(len(ch) for case in train + test for ch in case)
    (here / "data").mkdir(exist_ok=True)
    (here / "private").mkdir(exist_ok=True)
    save(here / "data" / "X_train.npy", stack(train, length))
    save(here / "data" / "y_train.npy", label_array(y_train))
    save(here / "data" / "X_test.npy", stack(test, length))
    save(here / "private" / "y_test.npy", label_array(y_test))
