"""The attacks on the selection score that read labels off the rows' order, as a hostile script runs
them: in the real sandbox, on real files, as root. A training file sorted by its label gave a script that
looked at no feature selection accuracy 1.0 (real test accuracy 0.48), and the same on a `--holdout`
task's test score, since a held row was known by its id (missing from train.csv) or by its place (after
the test rows). Now the rows are mixed (harness/mixing.py) and the hold-out disguised (tasks/create.py):
such a script scores like a guess."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from support.ordered_layouts import holdout_task, kaggle_task

from dsagent_cbr.harness.plan import hold_out
from dsagent_cbr.harness.run import run_script

# Each test row takes the label of the training row whose id is nearest its own.
BY_ID = """
import numpy as np, pandas as pd
train, test = pd.read_csv("train.csv"), pd.read_csv("test.csv")
order = np.argsort(train["id"].to_numpy())
ids, labels = train["id"].to_numpy()[order], train["kind"].to_numpy()[order]
at = np.clip(np.searchsorted(ids, test["id"].to_numpy()), 0, len(ids) - 1)
pd.DataFrame({"id": test["id"], "kind": labels[at]}).to_csv("submission.csv", index=False)
"""
# The rows past the test file's own (the data card gives their count) take the label at the same share
# of the way through the training file, as held rows appended in training-file order would have.
BY_PLACE = """
import numpy as np, pandas as pd
train, test = pd.read_csv("train.csv"), pd.read_csv("test.csv")
labels, after = train["kind"].to_numpy(), {after}
guess = np.repeat(labels[:1], len(test)).astype(object)
tail = np.arange(after, len(test))
guess[tail] = labels[((tail - after) * len(labels)) // max(len(tail), 1)]
pd.DataFrame({{"id": test["id"], "kind": guess}}).to_csv("submission.csv", index=False)
"""


def _chance(labels: pd.Series) -> float:
    """The best constant's accuracy, and three standard errors above it."""
    share = labels.value_counts(normalize=True).max()
    return share + 3 * np.sqrt(share * (1 - share) / len(labels))


@pytest.mark.integration
def test_a_label_sorted_training_file_gives_no_selection_row_its_label(tmp_path):
    task = kaggle_task(tmp_path, "sorted", sample=True)
    held = hold_out(task)
    for name, script in (("by-id", BY_ID), ("by-place", BY_PLACE.format(after=held.test_rows))):
        result = run_script(task, script, run_dir=tmp_path / name)
        assert result.ok, result.error
        assert result.selection_metric <= _chance(held.answers["kind"]), (name, result.selection_metric)


@pytest.mark.integration
def test_a_label_sorted_file_split_by_holdout_gives_no_test_row_its_label(tmp_path):
    task = holdout_task(tmp_path, "sorted")
    held = hold_out(task)
    answers = pd.read_csv(task.private_dir / task.answers)["kind"]
    for name, script in (("by-id", BY_ID), ("by-place", BY_PLACE.format(after=held.test_rows))):
        result = run_script(task, script, run_dir=tmp_path / name)
        assert result.ok, result.error
        assert result.test_metric <= _chance(answers), (name, result.test_metric)
        assert result.selection_metric <= _chance(held.answers["kind"]), (name, result.selection_metric)
