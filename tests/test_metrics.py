"""Our metrics against scikit-learn's on the same numbers."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from dsagent_cbr.tasks.metrics import get_metric

rng = np.random.default_rng(0)
Y = rng.normal(5, 2, 200).clip(0)
P = (Y + rng.normal(0, 1, 200)).clip(0)


@pytest.mark.parametrize("name,reference", [
    ("mse", skm.mean_squared_error(Y, P)),
    ("rmse", skm.mean_squared_error(Y, P) ** 0.5),
    ("mae", skm.mean_absolute_error(Y, P)),
    ("medae", skm.median_absolute_error(Y, P)),
    ("rmsle", skm.mean_squared_log_error(Y, P) ** 0.5),
])
def test_regression_metrics(name, reference):
    assert get_metric(name).fn(Y, P) == pytest.approx(reference)


def test_classification_metrics():
    y = rng.integers(0, 2, 300)
    s = np.clip(y * 0.3 + rng.uniform(0, 0.7, 300), 0, 1)
    assert get_metric("auroc").fn(y, s) == pytest.approx(skm.roc_auc_score(y, s))
    assert get_metric("accuracy").fn(y, (s > 0.5).astype(int)) == pytest.approx(skm.accuracy_score(y, s > 0.5))
    assert get_metric("accuracy").fn(np.array(["a", "b"]), np.array(["a", "c"])) == 0.5
    proba = rng.dirichlet([1, 1, 1], 300)
    labels = rng.integers(0, 3, 300)
    onehot = np.eye(3)[labels]
    assert get_metric("nll").fn(onehot, proba) == pytest.approx(skm.log_loss(labels, proba))
    multi = rng.integers(0, 2, (300, 4))
    scores = rng.uniform(size=(300, 4))
    assert get_metric("auroc").fn(multi, scores) == pytest.approx(skm.roc_auc_score(multi, scores, average="macro"))


def test_mcrmse_and_directions():
    y, p = rng.normal(size=(50, 2)), rng.normal(size=(50, 2))
    per_column = [skm.mean_squared_error(y[:, j], p[:, j]) ** 0.5 for j in range(2)]
    assert get_metric("mcrmse").fn(y, p) == pytest.approx(np.mean(per_column))
    assert get_metric("auroc").better(0.9, 0.8) and get_metric("rmse").better(1.0, 2.0)
    assert get_metric("rmse").better(1.0, None) and not get_metric("rmse").better(None, 1.0)
    with pytest.raises(KeyError):
        get_metric("f7")
