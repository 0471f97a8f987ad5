"""Table recipes: rows given ids and a fixed random 25% held out, with the test answers kept private."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd


def usable_texts(df: pd.DataFrame) -> pd.DataFrame:
    """Rows whose stripped `text` is non-empty, unique, and survives a csv round trip (a snippet such as
    "NA" would come back from read_csv as a missing value), re-indexed from 0."""
    df = df.copy()
    df["text"] = df["text"].astype(str).str.strip()
    back = pd.read_csv(io.StringIO(df[["text"]].to_csv(index=False)))["text"]
    df = df[back.notna().to_numpy() & (df["text"] != "").to_numpy()]
    return df.drop_duplicates(subset="text").reset_index(drop=True)


def write_holdout(here: Path, df: pd.DataFrame, targets: list[str]) -> None:
    """data/train.csv, data/test.csv (targets removed) and private/answers.csv under `here`."""
    df = df.copy()
    df.insert(0, "id", np.arange(len(df)))
    test = df.sample(frac=0.25, random_state=0)
    train = df.drop(index=test.index)
    (here / "data").mkdir(exist_ok=True)
    (here / "private").mkdir(exist_ok=True)
    train.to_csv(here / "data" / "train.csv", index=False)
    test.drop(columns=targets).to_csv(here / "data" / "test.csv", index=False)
    test[["id", *targets]].to_csv(here / "private" / "answers.csv", index=False)
