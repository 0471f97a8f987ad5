"""The metric `cbr tasks new` infers for a binary target, read as a Kaggle user means it: a sample
submission that holds one value in every row holds a placeholder, not labels. Fast: small tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dsagent_cbr.tasks.create import NewTaskRequest, create_task


def _folder(root: Path, labels: list, sample: list) -> NewTaskRequest:
    rng = np.random.default_rng(0)
    train = pd.DataFrame({"id": range(200), "x": rng.normal(size=200), "y": rng.choice(labels, 200)})
    test = pd.DataFrame({"id": range(200, 250), "x": rng.normal(size=50)})
    root.mkdir()
    train.to_csv(root / "train.csv", index=False)
    test.to_csv(root / "test.csv", index=False)
    pd.DataFrame({"id": test["id"], "y": (sample * 50)[:50]}).to_csv(root / "sample.csv", index=False)
    return NewTaskRequest(dest=root / "task", train=root / "train.csv", test=root / "test.csv",
                          sample=root / "sample.csv")


@pytest.mark.parametrize("labels, sample, metric, words", [
    ([0, 1], [0], "auroc", "holds one value (0) for every row: a placeholder"),
    ([0, 1], [0, 1, 1, 0], "accuracy", "holds labels"),
    ([0, 1], [0.5], "auroc", "holds probabilities"),
    ([True, False], [False], "accuracy", "holds one label (False) for every row: a placeholder"),
])
def test_a_constant_sample_is_a_placeholder_and_the_metric_says_how_to_change_it(tmp_path, labels, sample,
                                                                                 metric, words):
    report = create_task(_folder(tmp_path / "folder", labels, sample))
    assert report.metric == metric
    line = next(text for key, text in report.lines if key == "metric")
    assert words in line, line
    assert "--metric" in line or "holds probabilities" in words
