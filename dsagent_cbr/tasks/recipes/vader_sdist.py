"""The VADER paper's human-rated sentiment corpora, read from the vaderSentiment 3.3.2 sdist.

The ratings ship only in the source distribution, under additional_resources/hutto_ICWSM_2014.tar.gz:
`<stem>_GroundTruth.txt` (id, mean rating, text) and `<stem>_anonDataRatings.txt` (id, mean rating,
standard deviation, raw ratings). Both are tab separated; they are joined on id.
"""

import csv
import io
import tarfile
from pathlib import Path

import pandas as pd

from dsagent_cbr.tasks.recipes.holdout import usable_texts, write_holdout
from dsagent_cbr.tasks.sources import sdist_dir

SDIST = "vaderSentiment-3.3.2.tar.gz"
INNER = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
TARGETS = ["sentiment_mean", "sentiment_sd"]
DOWNLOAD = (
    "pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 -d ~/.cache/dsagent-cbr/sdists"
)


def sdist_path() -> Path:
    path = sdist_dir() / SDIST
    if not path.is_file():
        raise SystemExit(f"{path} is missing; fetch it with: {DOWNLOAD}")
    return path


def read_member(outer: tarfile.TarFile, name: str) -> bytes:
    member = outer.extractfile(name)
    if member is None:
        raise SystemExit(f"{name} is not a regular file in {SDIST}")
    return member.read()


def load_files(stem: str) -> tuple[bytes, bytes]:
    with tarfile.open(sdist_path(), "r:gz") as outer:
        inner_bytes = read_member(outer, INNER)
    with tarfile.open(fileobj=io.BytesIO(inner_bytes), mode="r:gz") as inner:
        truth = read_member(inner, f"hutto_ICWSM_2014/{stem}_GroundTruth.txt")
        ratings = read_member(inner, f"hutto_ICWSM_2014/{stem}_anonDataRatings.txt")
    return truth, ratings


def parse(truth: bytes, ratings: bytes) -> pd.DataFrame:
    # Quotes inside snippets are literal characters, not CSV quoting.
    options = {"sep": "\t", "header": None, "quoting": csv.QUOTE_NONE}
    text = pd.read_csv(
        io.StringIO(truth.decode("utf-8", errors="replace")),
        names=["id", "mean", "text"],
        **options,
    )
    raw = pd.read_csv(
        io.StringIO(ratings.decode("utf-8", errors="replace")),
        names=["id", "sentiment_mean", "sentiment_sd", "raw"],
        **options,
    )
    df = text.merge(raw, on="id", how="inner")
    # In a few rows the two files disagree on the mean for the same id, so the standard deviation cannot
    # be trusted to belong to that text: those rows are dropped.
    df = df[(df["mean"] - df["sentiment_mean"]).abs() < 1e-3]
    df = usable_texts(df)
    return df[["text", *TARGETS]]


def build_from_vader(here: Path, stem: str) -> None:
    """data/ and private/ for one of the VADER paper's rated corpora (movieReviewSnippets, tweets...):
    the snippet text and two targets, the raters' mean sentiment and its standard deviation."""
    df = parse(*load_files(stem))
    write_holdout(here, df, TARGETS)
