"""Build data/ and private/ for yeast-multilabel from the Yeast file shipped inside the river package.

The file is read from river's install folder without importing river, which would pull in its
whole estimator stack just to locate one csv.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
LABELS = [f"Class{i}" for i in range(1, 15)]


def yeast_path() -> Path:
    spec = importlib.util.find_spec("river")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("yeast-multilabel needs the river package installed (pip install river)")
    return Path(list(spec.submodule_search_locations)[0]) / "datasets" / "yeast.csv.gz"


def main() -> None:
    df = pd.read_csv(yeast_path())
    df[LABELS] = df[LABELS].astype(int)
    df = df.copy()  # the csv has 117 columns; a fresh frame avoids a fragmentation warning on insert
    df.insert(0, "id", np.arange(len(df)))
    test = df.sample(frac=0.25, random_state=0)
    train = df.drop(index=test.index)
    (HERE / "data").mkdir(exist_ok=True)
    (HERE / "private").mkdir(exist_ok=True)
    train.to_csv(HERE / "data" / "train.csv", index=False)
    test.drop(columns=LABELS).to_csv(HERE / "data" / "test.csv", index=False)
    test[["id", *LABELS]].to_csv(HERE / "private" / "answers.csv", index=False)


if __name__ == "__main__":
    main()
