"""Build data/ and private/ for yeast-multilabel from the Yeast file shipped inside the river package.

The file is read from river's install folder without importing river, which would pull in its
whole estimator stack just to locate one csv.
"""

import importlib.util
from pathlib import Path

import pandas as pd

from dsagent_cbr.tasks.recipes.holdout import write_holdout

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
    write_holdout(HERE, df, LABELS)


if __name__ == "__main__":
    main()
